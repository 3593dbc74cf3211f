"""The console's HTTP surface with a stand-in poller: pages, the CSRF guard, --read-only, events,
and the Plan endpoints (plans made by the console's own planning on stand-in answers)."""

from __future__ import annotations

from typing import Any

import pytest
from console_fakes import FakeSource
from starlette.testclient import TestClient

from headwater.console.app import create_app
from headwater.console.csrf import CsrfGuard
from headwater.console.plan import SPARK_ABOVE_REPLICAS

TOKEN = {"X-CSRF-Token": "tok"}


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
        assert f'<meta name="spark-above" content="{SPARK_ABOVE_REPLICAS}">' in resp.text
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
        some = [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 2}]  # "Cancel selected"
        assert client.post("/api/cancel", json={"partitions": some}, headers=h).json()["results"] == {"t-1": None,
                                                                                                      "t-2": None}
        assert client.post("/api/cancel", json={"all": True}, headers=h).status_code == 200
        assert client.post("/api/throttle", json={"rate": 1000}, headers=h).json() == {"done": ["throttle 1000"]}
        assert client.post("/api/throttle", json={"rate": None}, headers=h).status_code == 200
        assert client.post("/api/throttle", json={"rate": -5}, headers=h).status_code == 400
        assert client.post("/api/cancel", json={"partitions": "x"}, headers=h).status_code == 400
    assert source.cancelled == [[("t", 0)], [("t", 1), ("t", 2)], None]
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


# --- the Plan endpoints --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/plan", "/api/plan/execute", "/api/plan/elect"])
@pytest.mark.parametrize("headers", [{}, {"X-CSRF-Token": "wrong"}])
def test_plan_posts_without_the_token_are_refused(path: str, headers: dict[str, str]) -> None:
    source = FakeSource()
    with _client(source, CsrfGuard("tok")) as client:
        planned = client.post("/api/plan", json={"goal": "add-brokers", "brokers": [4]}, headers=TOKEN).json()
        resp = client.post(path, json={"goal": "rebalance", "id": planned["id"], "throttle": 5000}, headers=headers)
        assert resp.status_code == 403 and "CSRF" in resp.json()["error"]
    assert len(source.engines) == 1 and source.executed == [] and source.elected == []


@pytest.mark.parametrize(("body", "error"), [
    ({"goal": "nope"}, "unknown goal"),
    ({"goal": "replication-factor"}, "does not plan"),
    ({"goal": "add-brokers", "brokers": []}, "needs the ids"),
    ({"goal": "add-brokers", "brokers": "4"}, "list of broker ids"),
    ({"goal": "add-brokers", "brokers": [True]}, "list of broker ids"),
    ({"goal": "add-brokers", "brokers": [7]}, "unknown broker"),
    ({"goal": "rebalance", "engine": "hadoop"}, "unknown engine"),
    ({"goal": "rebalance", "throttle": 0}, "throttle"),
    ({"goal": "rebalance", "throttle": "fast"}, "throttle"),
])
def test_plan_request_validation(body: dict[str, Any], error: str) -> None:
    with _client(FakeSource(), CsrfGuard("tok")) as client:
        resp = client.post("/api/plan", json=body, headers=TOKEN)
        assert resp.status_code == 400 and error in resp.json()["error"], resp.json()


@pytest.mark.parametrize(("raw", "error"), [(b"{not json", "not JSON"), (b"[1, 2]", "JSON object")])
def test_plan_body_must_be_a_json_object(raw: bytes, error: str) -> None:
    with _client(FakeSource(), CsrfGuard("tok")) as client:
        for path in ("/api/plan", "/api/plan/execute", "/api/plan/elect"):
            resp = client.post(path, content=raw, headers={**TOKEN, "Content-Type": "application/json"})
            assert resp.status_code == 400 and error in resp.json()["error"]


def test_plan_engines_over_http() -> None:
    source = FakeSource()
    with _client(source, CsrfGuard("tok")) as client:
        auto = client.post("/api/plan", json={"goal": "add-brokers", "brokers": [4]}, headers=TOKEN).json()
        spark = client.post("/api/plan", json={"goal": "add-brokers", "brokers": [4], "engine": "spark"},
                            headers=TOKEN).json()
        local = client.post("/api/plan", json={"goal": "add-brokers", "brokers": [4], "engine": "local"},
                            headers=TOKEN).json()
    assert source.engines == ["auto", "spark", "local"]  # no engine named: auto
    assert auto["engine"]["name"] == "local" and auto["engine"]["requested"] == "auto"  # 12 replicas: small
    assert spark["engine"]["name"] == "spark" and spark["engine"]["master"] == "local[fake]"
    assert local["engine"]["name"] == "local" and local["engine"]["master"] is None
    assert source.spark.plans == 1
    assert spark["moves"] == local["moves"] == auto["moves"] and spark["summary"] == local["summary"]


def test_plan_execute_elect_and_download_over_http() -> None:
    source = FakeSource()
    with _client(source, CsrfGuard("tok")) as client:
        assert client.get("/plan").status_code == 200 and client.get("/quotas").status_code == 200
        view = client.post("/api/plan", json={"goal": "add-brokers", "brokers": [4]}, headers=TOKEN).json()
        assert view["moves"]
        resp = client.get(f"/api/plan/{view['id']}/reassignment.json")
        assert resp.status_code == 200 and "attachment" in resp.headers["content-disposition"]
        assert resp.json()["version"] == 1 and len(resp.json()["partitions"]) == len(view["moves"])
        assert client.get("/api/plan/nope/reassignment.json").status_code == 404
        for throttle in (0, -1, 1.5, "5", True, None):
            resp = client.post("/api/plan/execute", json={"id": view["id"], "throttle": throttle}, headers=TOKEN)
            assert resp.status_code == 400 and "throttle" in resp.json()["error"]
        assert client.post("/api/plan/execute", json={"id": "nope", "throttle": 5}, headers=TOKEN).status_code == 404
        assert client.post("/api/plan/execute", json={"throttle": 5}, headers=TOKEN).status_code == 404
        nothing = client.post("/api/plan", json={"goal": "leaders"}, headers=TOKEN).json()  # already preferred
        assert nothing["moves"] == []
        resp = client.post("/api/plan/execute", json={"id": nothing["id"], "throttle": 5}, headers=TOKEN)
        assert resp.status_code == 400 and "moves nothing" in resp.json()["error"]
        resp = client.post("/api/plan/execute", json={"id": view["id"], "throttle": 5000}, headers=TOKEN)
        assert resp.status_code == 200 and resp.json()["done"] == ["Successfully started partition reassignments"]
        assert client.post("/api/plan/elect", json={"id": "nope"}, headers=TOKEN).status_code == 404
        assert client.post("/api/plan/elect", json={"id": view["id"]}, headers=TOKEN).status_code == 200
    assert source.executed == [(view["id"], 5000)] and source.elected == [view["id"]]


def test_read_only_console_plans_but_never_executes() -> None:
    source = FakeSource(read_only=True)
    with _client(source, CsrfGuard("tok")) as client:
        view = client.post("/api/plan", json={"goal": "rebalance"}, headers=TOKEN).json()
        assert client.get(f"/api/plan/{view['id']}/reassignment.json").status_code == 200
        for path, body in (("/api/plan/execute", {"id": view["id"], "throttle": 5000}),
                           ("/api/plan/elect", {"id": view["id"]})):
            resp = client.post(path, json=body, headers=TOKEN)
            assert resp.status_code == 403 and "read-only" in resp.json()["error"]
        # Refused as read-only before the token is looked at: nothing tells a caller the token is wrong.
        assert client.post("/api/plan/execute", json=body, headers={}).json()["error"] == "the console is read-only"
        assert client.post("/api/plan", json={"goal": "rebalance"}).status_code == 403  # planning still needs the token
    assert source.executed == [] and source.elected == []
