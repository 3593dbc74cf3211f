"""The console's web application (Starlette): pages, the snapshot as JSON and as server-sent
events, and the writes (cancel, throttle, the Plan page's, self-healing on or off), each behind the
read-only switch and the CSRF token."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from headwater.console.csrf import HEADER, CsrfGuard
from headwater.console.plan import SPARK_ABOVE_REPLICAS, Plan, PlanStore
from headwater.planner.errors import PlannerError

PAGES = {"cluster": "Cluster", "topics": "Topics", "reassignments": "Reassignments", "plan": "Plan",
         "quotas": "Quotas"}
SSE_CHECK_S = 0.25  # how often an event stream looks for a new snapshot
SSE_HEARTBEAT_S = 15.0  # a comment line now and then, so proxies keep an idle stream open
MAX_BODY = 64 * 1024
SECURITY_HEADERS = {
    # The pages use only their own script and style: nothing inline, nothing from elsewhere.
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class Source(Protocol):
    """What the application needs of the poller (``reader.Poller``; a stand-in in unit tests)."""

    snapshot: dict[str, Any]
    version: int
    read_only: bool

    def cancel(self, partitions: list[tuple[str, int]] | None) -> dict[str, str | None]: ...

    def set_throttle(self, rate: int | None) -> list[str]: ...

    def set_self_healing(self, enable: bool) -> list[str]: ...

    @property
    def plans(self) -> PlanStore: ...

    def make_plan(self, goal: object, brokers: object, throttle: float | None = None,
                  engine: object = "auto") -> dict[str, Any]: ...

    def execute_plan(self, plan: Plan, throttle: int) -> list[str]: ...

    def elect_preferred(self, plan: Plan) -> list[str]: ...


def _snapshot_text(source: Source) -> str:
    """The snapshot as JSON: the poller's own encoding when it has one (``reader.SnapshotJson``
    reuses the text of rows that did not change: 5.5 MB with 10,000 moves)."""
    encode = getattr(source, "snapshot_json", None)
    return str(encode()) if callable(encode) else json.dumps(source.snapshot)


def _page_template() -> str:
    return resources.files("headwater.console").joinpath("static/page.html").read_text()


def create_app(source: Source, guard: CsrfGuard, *, allowed_hosts: list[str] | None = None,
               lifespan: Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]] | None = None) -> Starlette:
    template = _page_template()

    def page(request: Request) -> Response:
        name = request.path_params["page"]
        if name not in PAGES:
            return Response("no such page", status_code=404)
        active = ' class="active"'
        nav = "".join(f'<a href="/{p}"{active if p == name else ""}>{t}</a>' for p, t in PAGES.items())
        body = (template.replace("{{title}}", PAGES[name]).replace("{{page}}", name).replace("{{nav}}", nav)
                .replace("{{csrf}}", html.escape(guard.token)).replace("{{read_only}}", str(source.read_only).lower())
                .replace("{{spark_above}}", str(SPARK_ABOVE_REPLICAS)))
        return HTMLResponse(body, headers=SECURITY_HEADERS)

    def index(_: Request) -> Response:
        return RedirectResponse("/cluster")

    def snapshot(_: Request) -> Response:
        return Response(_snapshot_text(source), media_type="application/json", headers=SECURITY_HEADERS)

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            seen = -1
            idle = 0.0
            while not await request.is_disconnected():
                if source.version != seen:
                    seen = source.version
                    idle = 0.0
                    yield f"event: snapshot\ndata: {_snapshot_text(source)}\n\n"
                elif idle >= SSE_HEARTBEAT_S:
                    idle = 0.0
                    yield ": keep-alive\n\n"
                await asyncio.sleep(SSE_CHECK_S)
                idle += SSE_CHECK_S

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={**SECURITY_HEADERS, "x-accel-buffering": "no"})

    def guarded(handler: Callable[[dict[str, Any]], Awaitable[Response]], *,
                write: bool = True) -> Callable[[Request], Awaitable[Response]]:
        """Every POST: refused when read-only (a write), then without the CSRF token, then when the
        body is not JSON. Planning writes nothing, so a read-only console plans too."""
        async def endpoint(request: Request) -> Response:
            if write and source.read_only:
                return JSONResponse({"error": "the console is read-only"}, status_code=403)
            if not guard.check(request.headers.get(HEADER)):
                return JSONResponse({"error": "missing or wrong CSRF token: reload the page"}, status_code=403)
            raw = await request.body()
            if len(raw) > MAX_BODY:
                return JSONResponse({"error": "request too large"}, status_code=413)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return JSONResponse({"error": "the body is not JSON"}, status_code=400)
            if not isinstance(body, dict):
                return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
            try:
                return await handler(body)
            except Exception as exc:  # the cluster's refusal or an unreachable broker: shown on the page
                return JSONResponse({"error": str(exc)}, status_code=502)
        return endpoint

    async def cancel(body: dict[str, Any]) -> Response:
        partitions: list[tuple[str, int]] | None
        if body.get("all") is True:
            partitions = None
        else:
            try:
                partitions = [(str(p["topic"]), int(p["partition"])) for p in body["partitions"]]
            except (KeyError, TypeError, ValueError):
                return JSONResponse({"error": 'expected {"all": true} or {"partitions": [{"topic", "partition"}]}'},
                                    status_code=400)
        # The admin client blocks: a worker thread, so the event loop keeps serving pages and events.
        results = await asyncio.to_thread(source.cancel, partitions)
        failed = {k: v for k, v in results.items() if v}
        return JSONResponse({"results": results, "error": "; ".join(f"{k}: {v}" for k, v in failed.items()) or None},
                            status_code=200 if not failed else 409)

    async def throttle(body: dict[str, Any]) -> Response:
        rate = body.get("rate")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
            return JSONResponse({"error": "rate must be a positive number of bytes per second, or null"}, status_code=400)
        done = await asyncio.to_thread(source.set_throttle, rate)
        return JSONResponse({"done": done})

    async def self_healing(body: dict[str, Any]) -> Response:
        enable = body.get("enable")
        if not isinstance(enable, bool):
            return JSONResponse({"error": 'expected {"enable": true} or {"enable": false}'}, status_code=400)
        done = await asyncio.to_thread(source.set_self_healing, enable)
        return JSONResponse({"done": done})

    def positive_int(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    async def plan(body: dict[str, Any]) -> Response:
        throttle = body.get("throttle")
        if throttle is not None and not positive_int(throttle):
            return JSONResponse({"error": "throttle must be a positive number of bytes per second"}, status_code=400)
        try:
            # The planner is CPU work (pandas, or Spark's start-up and job): a worker thread, so pages
            # and events keep flowing.
            view = await asyncio.to_thread(source.make_plan, body.get("goal"), body.get("brokers", []), throttle,
                                           body.get("engine", "auto"))
        except PlannerError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(view)

    def known_plan(body: dict[str, Any]) -> Plan | None:
        return source.plans.get(str(body.get("id", "")))

    async def execute(body: dict[str, Any]) -> Response:
        found = known_plan(body)
        if found is None:
            return JSONResponse({"error": "no such plan (the console restarted?): plan again"}, status_code=404)
        if not positive_int(body.get("throttle")):
            return JSONResponse({"error": "throttle must be a positive number of bytes per second"}, status_code=400)
        if not found.targets:
            return JSONResponse({"error": "the plan moves nothing"}, status_code=400)
        lines = await asyncio.to_thread(source.execute_plan, found, int(body["throttle"]))
        return JSONResponse({"done": lines})

    async def elect(body: dict[str, Any]) -> Response:
        found = known_plan(body)
        if found is None:
            return JSONResponse({"error": "no such plan (the console restarted?)"}, status_code=404)
        lines = await asyncio.to_thread(source.elect_preferred, found)
        return JSONResponse({"done": lines})

    def download(request: Request) -> Response:
        found = source.plans.get(request.path_params["plan_id"])
        if found is None:
            return Response("no such plan", status_code=404)
        return Response(found.reassignment_json, media_type="application/json", headers={
            **SECURITY_HEADERS, "content-disposition": f'attachment; filename="reassignment-{found.id}.json"'})

    def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True, "version": source.version})

    static = resources.files("headwater.console").joinpath("static")
    routes = [
        Route("/", index),
        Route("/healthz", healthz),
        Route("/api/snapshot", snapshot),
        Route("/api/events", events),
        Route("/api/cancel", guarded(cancel), methods=["POST"]),
        Route("/api/throttle", guarded(throttle), methods=["POST"]),
        Route("/api/self-healing", guarded(self_healing), methods=["POST"]),
        Route("/api/plan", guarded(plan, write=False), methods=["POST"]),
        Route("/api/plan/execute", guarded(execute), methods=["POST"]),
        Route("/api/plan/elect", guarded(elect), methods=["POST"]),
        Route("/api/plan/{plan_id}/reassignment.json", download),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
        Route("/{page}", page),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)] if allowed_hosts else []
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
