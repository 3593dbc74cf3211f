"""Failed authentications are logged, at most once per interval per client address."""

from __future__ import annotations

import logging

import pytest

from headwater.server.authn import FailureLog


def test_rate_limited_per_address(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    flog = FailureLog(interval_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="headwater.server.authn"):
        for port in range(100):
            flog.failed(f"10.0.0.1:{port}", "PLAIN", "Invalid username or password")
        flog.failed("10.0.0.2:1", "SCRAM-SHA-512", "Invalid user credentials")
        now[0] = 10.5
        flog.failed("10.0.0.1:5000", "PLAIN", "Invalid username or password")
    assert flog.logged == 3
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("failed authentication from 10.0.0.1:0 (PLAIN)")
    assert "10.0.0.2:1" in lines[1]
    assert lines[2].endswith("(99 more from this address not logged)")
