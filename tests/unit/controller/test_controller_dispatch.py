"""How the controller takes events: one handler per event type, and what a result's requests depend on."""

from __future__ import annotations

from typing import get_args

import pytest
from controller_fixtures import elect, snapshot, tp

from headwater.controller.controller import EVENT_RULES, Controller
from headwater.controller.events import (
    BrokerExpired,
    ControllerElected,
    DeleteTopicsRequested,
    Event,
    Resigned,
)


def test_every_event_type_has_a_rule_and_a_handler() -> None:
    assert set(Controller(1).handlers) == set(EVENT_RULES) == set(get_args(Event))


def test_a_value_that_is_not_an_event_is_refused() -> None:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2, 3)}}, states={tp("t"): (1, 0, (1, 2, 3), 0)}))
    with pytest.raises(TypeError, match="not a controller event"):
        ctl.handle(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Controller(1).handle(object())  # type: ignore[arg-type]


def _cluster() -> Controller:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2, 3)}, "u": {0: (2, 3, 1)}},
                            states={tp("t"): (1, 0, (1, 2, 3), 0), tp("u"): (2, 0, (2, 3, 1), 0)}))
    return ctl


def test_requests_read_after_later_events_are_the_ones_decided() -> None:
    """Requests are built when first read, from what the event decided: neither applied writes nor
    later events (here a broker leaving and a deletion completing its queueing) change them."""
    eager, lazy = _cluster(), _cluster()
    expected = eager.handle(DeleteTopicsRequested(("t",))).requests
    result = lazy.handle(DeleteTopicsRequested(("t",)))
    for write in result.writes:
        lazy.apply(write)
    for write in lazy.handle(BrokerExpired(2)).writes:
        lazy.apply(write)
    lazy.validate_state()
    assert expected and result.requests == expected


def test_a_resignation_drops_requests_not_read_yet() -> None:
    ctl = _cluster()
    result = ctl.handle(DeleteTopicsRequested(("t",)))
    assert result.writes
    ctl.handle(Resigned())
    assert result.requests == ()


def test_a_new_election_drops_requests_not_read_yet() -> None:
    ctl = _cluster()
    result = ctl.handle(DeleteTopicsRequested(("t",)))
    ctl.handle(ControllerElected(3, 8, snapshot()))
    assert result.requests == ()
