"""The console's HTTP surface with a stand-in poller: pages, the CSRF guard, --read-only, events."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from headwater.console.app import create_app
from headwater.console.csrf import CsrfGuard


class FakeSource:
    def __init__(self, read_only: bool = False) -> None:
        self.snapshot: dict[str, Any] = {"taken_at": 1.0, "errors": [], "brokers": [], "topics": []}
        self.version = 1
        self.read_only = read_only
        self.cancelled: list[Any] = []
        self.throttles: list[int | None] = []

    def cancel(self, partitions: list[tuple[str, int]] | None) -> dict[str, str | None]:
        self.cancelled.append(partitions)
        return {"t-0": None}

    def set_throttle(self, rate: int | None) -> list[str]:
        self.throttles.append(rate)
        return [f"throttle {rate}"]


def _client(source: FakeSource, guard: CsrfGuard) -> TestClient:
    return TestClient(create_app(source, guard, allowed_hosts=["testserver"]))


def test_csrf_guard() -> None:
    guard = CsrfGuard()
    assert len(guard.token) >= 40 and CsrfGuard().token != guard.token  # a fresh secret per process
    assert guard.check(guard.token)
    assert not guard.check(None) and not guard.check("") and not guard.check(guard.token[:-1])


def test_pages_carry_the_token_and_security_headers() -> None:
    guard = CsrfGuard("tok")
    with _client(FakeSource(), guard) as client:
        resp = client.get("/reassignments")
        assert resp.status_code == 200
        assert '<meta name="csrf-token" content="tok">' in resp.text
        assert '<meta name="read-only" content="false">' in resp.text
        assert "default-src 'self'" in resp.headers["content-security-policy"]
        assert client.get("/nope").status_code == 404
        assert client.get("/api/snapshot").json()["taken_at"] == 1.0
        assert client.get("/static/console.js").status_code == 200


@pytest.mark.parametrize("headers", [{}, {"X-CSRF-Token": "wrong"}])
def test_post_without_the_token_is_refused(headers: dict[str, str]) -> None:
    source = FakeSource()
    with _client(source, CsrfGuard("tok")) as client:
        resp = client.post("/api/cancel", json={"all": True}, headers=headers)
        assert resp.status_code == 403 and "CSRF" in resp.json()["error"]
    assert source.cancelled == []


def test_writes_with_the_token() -> None:
    source = FakeSource()
    with _client(source, CsrfGuard("tok")) as client:
        h = {"X-CSRF-Token": "tok"}
        assert client.post("/api/cancel", json={"partitions": [{"topic": "t", "partition": 0}]}, headers=h).status_code == 200
        assert client.post("/api/cancel", json={"all": True}, headers=h).status_code == 200
        assert client.post("/api/throttle", json={"rate": 1000}, headers=h).json() == {"done": ["throttle 1000"]}
        assert client.post("/api/throttle", json={"rate": None}, headers=h).status_code == 200
        assert client.post("/api/throttle", json={"rate": -5}, headers=h).status_code == 400
        assert client.post("/api/cancel", json={"partitions": "x"}, headers=h).status_code == 400
    assert source.cancelled == [[("t", 0)], None]
    assert source.throttles == [1000, None]


def test_read_only_refuses_every_write() -> None:
    source = FakeSource(read_only=True)
    with _client(source, CsrfGuard("tok")) as client:
        assert '<meta name="read-only" content="true">' in client.get("/cluster").text
        for path, body in (("/api/cancel", {"all": True}), ("/api/throttle", {"rate": 1})):
            resp = client.post(path, json=body, headers={"X-CSRF-Token": "tok"})
            assert resp.status_code == 403 and "read-only" in resp.json()["error"]
    assert source.cancelled == [] and source.throttles == []


def test_foreign_host_is_refused() -> None:
    # DNS rebinding: a page of evil.example resolved to 127.0.0.1 must not be served the token.
    with _client(FakeSource(), CsrfGuard("tok")) as client:
        assert client.get("/cluster", headers={"Host": "evil.example"}).status_code == 400
