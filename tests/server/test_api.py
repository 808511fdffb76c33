"""The HTTP API in-process, on SQLite and (marked `postgres`) PostgreSQL."""

from __future__ import annotations

import asyncio
import gc
import inspect
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import httpx
import psycopg
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute

from opennua.server._authz import Reader, api_routes, unguarded
from opennua.server._serve import GC_THRESHOLD, settle_heap
from opennua.store import FileBlobStore

from ._harness import AUTH, TOKEN, Env, environment, park_for_input

PROBLEM = "application/problem+json"


async def _session(client: httpx.AsyncClient, title: str = "t") -> str:
    response = await client.post("/v1/sessions", json={"title": title, "client_id": "cli_a"})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["session_id"]
    return session_id


async def _message(
    client: httpx.AsyncClient, sid: str, text: str = "hi", **extra: Any
) -> httpx.Response:
    body = {"content": [{"type": "text", "text": text}], "client_id": "cli_a", **extra}
    return await client.post(f"/v1/sessions/{sid}/messages", json=body)


async def test_message_shows_in_history_and_snapshot(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client, "first")
        response = await _message(client, sid, "hello")
        assert response.status_code == 202, response.text
        ids = response.json()
        history = (await client.get(f"/v1/sessions/{sid}/actions", params={"after": 0})).json()
        types = [a["type"] for a in history["actions"]]
        assert types == ["session.created", "turn.started"]
        started = history["actions"][1]
        assert started["turn_id"] == ids["turn_id"]
        assert started["data"]["execution_id"] == ids["execution_id"]
        assert started["client_id"] == "cli_a"
        assert started["ts"].endswith("Z")
        page = (
            await client.get(f"/v1/sessions/{sid}/actions", params={"after": 1, "limit": 1})
        ).json()
        assert [a["seq"] for a in page["actions"]] == [2]
        snap = (await client.get(f"/v1/sessions/{sid}")).json()
        assert snap["seq"] == 2
        assert snap["state"]["title"] == "first"
        assert snap["state"]["turns"][0]["turn_id"] == ids["turn_id"]
        execution = (await client.get(f"/v1/executions/{ids['execution_id']}")).json()
        assert execution["status"] == "queued"
        assert execution["epoch"] == 0 and execution["attempts"] == []
        assert execution["deadline_at"] is not None
        # The turn span's traceparent: in the turn's trace, the span id fixed at acceptance.
        trace_id = snap["state"]["turns"][0]["trace_id"]
        assert execution["traceparent"].startswith(f"00-{trace_id}-")
        listed = (await client.get("/v1/sessions")).json()
        assert [s["session_id"] for s in listed["items"]] == [sid]


async def test_auth_is_required_and_cookie_login_works(env: Env) -> None:
    async with env.client() as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
        for path in ("/v1/sessions", "/metrics", "/openapi.json", "/v1/nope"):
            response = await client.get(path)
            assert response.status_code == 401, path
            assert response.headers["content-type"] == PROBLEM
            assert response.json()["code"] == "unauthorized"
        bad = await client.get("/v1/sessions", headers={"Authorization": "Bearer wrong"})
        assert bad.status_code == 401
        # A token in an API query string is never accepted.
        assert (await client.get("/v1/sessions", params={"token": TOKEN})).status_code == 401
        assert (await client.get("/login", params={"token": "wrong"})).status_code == 401
        login = await client.get("/login", params={"token": TOKEN})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert TOKEN not in cookie
        assert (await client.get("/v1/sessions")).status_code == 200
        # State changes by cookie need our own Origin.
        body = {"title": "x"}
        assert (await client.post("/v1/sessions", json=body)).status_code == 403
        evil = {"Origin": "https://evil.example"}
        assert (await client.post("/v1/sessions", json=body, headers=evil)).status_code == 403
        own = {"Origin": "http://testserver"}
        assert (await client.post("/v1/sessions", json=body, headers=own)).status_code == 201


async def test_not_found_and_validation(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        for path in (
            "/v1/sessions/ses_missing",
            "/v1/sessions/ses_missing/actions",
            "/v1/executions/exe_missing",
            "/v1/artifacts/art_missing",
            "/v1/nope",
        ):
            response = await client.get(path)
            assert response.status_code == 404, path
            assert response.json()["code"] == "not_found"
        assert (await _message(client, "ses_missing")).status_code == 404
        sid = await _session(client)
        missing_request = await client.post(
            f"/v1/sessions/{sid}/input-requests/req_nope/answer", json={"option_id": "x"}
        )
        assert missing_request.status_code == 404
        invalid = await client.post(f"/v1/sessions/{sid}/messages", json={"content": []})
        assert invalid.status_code == 422
        problem = invalid.json()
        assert problem["code"] == "validation_error" and problem["errors"]
        assert invalid.headers["content-type"] == PROBLEM
        unknown_field = await client.post(f"/v1/sessions/{sid}/cancel", json={"bogus": 1})
        assert unknown_field.status_code == 422
        both = await client.post(
            f"/v1/sessions/{sid}/input-requests/req_x/answer", json={"option_id": "a", "payload": 1}
        )
        assert both.status_code == 422
        big = await client.post(
            f"/v1/sessions/{sid}/messages",
            content=b'{"content": "' + b"x" * (1 << 20) + b'"}',
            headers={"content-type": "application/json"},
        )
        assert big.status_code == 413 and big.json()["code"] == "payload_too_large"


async def test_if_busy_reject_and_interrupt(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        first = (await _message(client, sid, "one")).json()
        busy = await _message(client, sid, "two", if_busy="reject")
        assert busy.status_code == 409 and busy.json()["code"] == "session_busy"
        queued = await _message(client, sid, "three")
        assert queued.status_code == 202
        interrupt = await _message(client, sid, "four", if_busy="interrupt")
        assert interrupt.status_code == 202
        for eid in (first["execution_id"], queued.json()["execution_id"]):
            assert (await env.store.get_execution(eid)).cancel_requested
        new = await env.store.get_execution(interrupt.json()["execution_id"])
        assert not new.cancel_requested
        cancel = await client.post(f"/v1/sessions/{sid}/cancel", json={})
        assert cancel.status_code == 202


async def test_idempotency_one_turn_for_twenty_concurrent_posts(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        headers = {"Idempotency-Key": "key-1"}
        body = {"content": [{"type": "text", "text": "once"}], "client_id": "cli_a"}
        responses = await asyncio.gather(
            *(
                client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
                for _ in range(20)
            )
        )
        accepted = [r for r in responses if r.status_code == 202]
        in_flight = [r for r in responses if r.status_code == 409]
        assert len(accepted) + len(in_flight) == 20
        assert all(r.json()["code"] == "request_in_flight" for r in in_flight)
        assert len({r.json()["turn_id"] for r in accepted}) == 1
        assert len(await env.store.list_executions(sid)) == 1
        history = await env.host.history(sid)
        assert [a["type"] for a in history].count("turn.started") == 1
        # A retransmission after completion replays the original answer.
        again = await client.post(f"/v1/sessions/{sid}/messages", json=body, headers=headers)
        assert again.status_code == 202 and again.json() == accepted[0].json()
        other = {**body, "content": [{"type": "text", "text": "different"}]}
        reused = await client.post(f"/v1/sessions/{sid}/messages", json=other, headers=headers)
        assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"


async def test_fifty_concurrent_answers_one_winner(env: Env) -> None:
    options = [
        {"option_id": "allow", "name": "Allow", "kind": "allow_once"},
        {"option_id": "deny", "name": "Deny", "kind": "reject_once"},
    ]
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        ids = (await _message(client, sid)).json()
        rid = await park_for_input(env, sid, ids["execution_id"], ids["turn_id"], options=options)
        wrong = await client.post(
            f"/v1/sessions/{sid}/input-requests/{rid}/answer", json={"option_id": "maybe"}
        )
        assert wrong.status_code == 422
        responses = await asyncio.gather(
            *(
                client.post(
                    f"/v1/sessions/{sid}/input-requests/{rid}/answer",
                    json={"option_id": "allow" if i % 2 else "deny", "client_id": f"cli_{i}"},
                )
                for i in range(50)
            )
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [200] + [409] * 49
        winner = next(r for r in responses if r.status_code == 200).json()["resolution"]
        assert winner["answered_by"]["client_id"].startswith("cli_")
        for loser in (r for r in responses if r.status_code == 409):
            assert loser.json()["code"] == "input_request_resolved"
            assert loser.json()["resolution"] == winner
        execution = await env.store.get_execution(ids["execution_id"])
        assert execution.status == "queued"
        history = await env.host.history(sid)
        resolved = [a for a in history if a["type"] == "input_request.resolved"]
        assert len(resolved) == 1 and resolved[0]["data"]["answered_by"] == winner["answered_by"]
        _, state = await env.host.snapshot(sid)
        assert state["open_input_requests"] == []


async def test_answer_checks_schema_and_late_answer_is_gone(env: Env) -> None:
    schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        ids = (await _message(client, sid)).json()
        rid = await park_for_input(
            env, sid, ids["execution_id"], ids["turn_id"], response_schema=schema, expires_in=60
        )
        url = f"/v1/sessions/{sid}/input-requests/{rid}/answer"
        assert (await client.post(url, json={"payload": {"name": 3}})).status_code == 422
        assert (await client.post(url, json={"payload": {}})).status_code == 422
        env.clock.advance(120)
        late = await client.post(url, json={"payload": {"name": "ok"}})
        assert late.status_code == 410 and late.json()["code"] == "gone"


async def test_retry_creates_a_new_execution(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        ids = (await _message(client, sid, "again")).json()
        url = f"/v1/sessions/{sid}/turns/{ids['turn_id']}/retry"
        assert (await client.post(url, json={})).status_code == 409  # still active
        claimed = await env.store.claim("sup_test", env.clock(), 15.0)
        assert claimed is not None
        async with env.store.fenced(ids["execution_id"], claimed.epoch) as tx:
            tx.finish("failed", now=env.clock())
        retried = await client.post(url, json={})
        assert retried.status_code == 202, retried.text
        new = await env.store.get_execution(retried.json()["execution_id"])
        assert new.retry_of == ids["execution_id"] and new.input == [
            {"type": "text", "text": "again"}
        ]
        started = [a for a in await env.host.history(sid) if a["type"] == "turn.started"][-1]
        assert started["data"]["retry_of"] == ids["turn_id"]
        assert started["data"]["trigger"]["kind"] == "retry"
        missing = await client.post(f"/v1/sessions/{sid}/turns/trn_missing/retry", json={})
        assert missing.status_code == 404


async def test_update_session_and_metrics(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        response = await client.patch(f"/v1/sessions/{sid}", json={"title": "renamed"})
        assert response.status_code == 200
        assert (await client.get(f"/v1/sessions/{sid}")).json()["state"]["title"] == "renamed"
        metrics = (await client.get("/metrics")).text
        assert "nua_actions_appended_total" in metrics
        assert "nua_subscribers" in metrics and "nua_lagging_drops_total" in metrics
        assert "nua_claims_total" in metrics and "nua_fenced_writes_total" in metrics
        schema = (await client.get("/openapi.json")).json()
        assert "/v1/sessions/{session_id}/messages" in schema["paths"]


async def _tamper(env: Env, store_url: str, sha256: str) -> None:
    """Overwrite a stored blob's bytes behind the store's back, whatever its backend."""
    blobs = env.store.blobs
    if isinstance(blobs, FileBlobStore):
        blobs.path(sha256).write_bytes(b"tampered")
        return
    async with await psycopg.AsyncConnection.connect(store_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE blob_chunks SET data = %s WHERE blob = %s", (b"tampered", sha256)
        )


async def test_artifact_metadata_and_content(env: Env, store_url: str) -> None:
    from opennua.store import ArtifactRecord

    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        data = b"hello artifact"
        ref = await env.store.blobs.put(data)
        await env.store.put_artifact(
            ArtifactRecord(
                artifact_id="art_1",
                session_id=sid,
                name="hello.txt",
                media_type="text/plain",
                size=ref.size,
                sha256=ref.sha256,
                created_at=env.clock(),
            )
        )
        meta = (await client.get("/v1/artifacts/art_1")).json()
        assert meta["sha256"] == ref.sha256 and meta["size"] == len(data)
        content = await client.get("/v1/artifacts/art_1/content")
        assert content.status_code == 200 and content.content == data
        await _tamper(env, store_url, ref.sha256)
        corrupted = await client.get("/v1/artifacts/art_1/content")
        assert corrupted.status_code == 500 and corrupted.json()["code"] == "blob_corrupted"


async def test_unexpected_errors_are_problem_json(env: Env, monkeypatch: Any) -> None:
    async def broken(session_id: str) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(env.host, "snapshot_json", broken)
    transport = httpx.ASGITransport(app=env.app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        created = await c.post("/v1/sessions", json={})
        response = await c.get(f"/v1/sessions/{created.json()['session_id']}")
    assert response.status_code == 500
    assert response.json()["code"] == "internal_error"
    assert "boom" not in response.text


async def test_readyz_says_not_ready_while_the_sqlite_writer_cannot_write(
    tmp_path: Path,
) -> None:
    """A wedged writer answers reads but accepts no write: /readyz must say so."""
    import threading

    from tests.store.test_writable import Unit, _Blocks

    release = threading.Event()
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as env:
        store: Any = env.store
        store.check_writable_timeout = 0.3
        stuck = asyncio.ensure_future(store._commit(Unit(None, (_Blocks(release),))))
        try:
            await asyncio.sleep(0.05)
            async with env.client() as client:
                response = await client.get("/readyz")
                assert response.status_code == 503
                assert response.json()["code"] == "unavailable"
                assert "cannot write" in response.json()["detail"]
                release.set()
                assert await stuck == [None]
                assert (await client.get("/readyz")).status_code == 200
        finally:
            release.set()


async def test_a_store_that_cannot_say_who_the_caller_is_answers_503(
    env: Env, monkeypatch: Any
) -> None:
    from opennua.store import Unavailable

    async def down(token_id: str) -> Any:
        raise Unavailable("the database is gone")

    monkeypatch.setattr(env.store, "get_token", down)
    bearer = {"Authorization": "Bearer nua.tok_uncached.secret"}
    async with env.client(headers=bearer) as client:
        response = await client.get("/v1/sessions")
    assert response.status_code == 503 and response.json()["code"] == "unavailable"


async def test_an_answer_whose_commit_outcome_is_lost_is_503_and_its_retransmission_replays(
    env: Env, monkeypatch: Any
) -> None:
    """Found by the chaos run (issue 20): the database restarting at the answer's COMMIT
    gave a 500. It is a 503 (retry), and the same key then replays what did commit."""
    from opennua.store import CommitUnknown
    from opennua.store._inputs import ResolveInput
    from opennua.store._unit import Unit

    real = env.store._commit
    lost: list[str] = []

    async def committed_then_lost(unit: Unit) -> Any:
        result = await real(unit)
        if not lost and any(isinstance(op, ResolveInput) for op in unit.ops):
            lost.append("once")
            raise CommitUnknown("postgresql COMMIT failed: terminating connection")
        return result

    monkeypatch.setattr(env.store, "_commit", committed_then_lost)
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        ids = (await _message(client, sid)).json()
        options = [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]
        rid = await park_for_input(env, sid, ids["execution_id"], ids["turn_id"], options=options)
        path = f"/v1/sessions/{sid}/input-requests/{rid}/answer"
        body = {"option_id": "allow", "client_id": "cli_a"}
        key = {"Idempotency-Key": "answer-1"}
        first = await client.post(path, json=body, headers=key)
        assert first.status_code == 503 and first.json()["code"] == "unavailable", first.text
        again = await client.post(path, json=body, headers=key)
        assert again.status_code == 200, again.text
        assert again.json()["resolution"]["answered_by"]["client_id"] == "cli_a"


async def test_a_delivery_report_becomes_delivery_updated(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        path = f"/v1/sessions/{sid}/deliveries/dlv_x"
        body = {"channel": "matrix", "target": "!r:hs", "kind": "message", "client_id": "cli_b"}
        response = await client.post(path, json={**body, "status": "pending"})
        assert response.status_code == 202 and response.json() == {"delivery_id": "dlv_x"}
        sent = {**body, "status": "sent", "attempts": 1, "event_id": "$e"}
        assert (await client.post(path, json=sent)).status_code == 202
        closed = await client.post(path, json={**body, "status": "retrying", "attempts": 2})
        assert closed.status_code == 409 and closed.json()["code"] == "delivery_closed"
        bad = await client.post(path, json={**body, "status": "lost"})
        assert bad.status_code == 422 and bad.headers["content-type"] == PROBLEM
        snap = (await client.get(f"/v1/sessions/{sid}")).json()
        assert snap["state"]["deliveries"]["dlv_x"]["status"] == "sent"


async def test_usage_sums_tokens_and_prices_them_per_principal(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = await _session(client)
        assert (await _message(client, sid)).status_code == 202
        (execution,) = await env.store.list_executions(sid)
        priced = {"input_tokens": 1000, "output_tokens": 500, "cache_read_input_tokens": 100}

        def recorded(n: int, provider: str, model: str, **tokens: int) -> dict[str, Any]:
            return {
                "v": 1, "session_id": sid, "seq": None, "id": f"act_usage_{n}",
                "type": "usage.recorded", "ts": "2026-11-29T08:00:00.000Z",
                "turn_id": execution.turn_id, "run_id": None, "client_id": None,
                "intent_id": None, "data": {"provider": provider, "model": model, **tokens},
            }  # fmt: skip

        await env.store.append(
            sid,
            [
                recorded(1, "openai", "gpt-4o", **priced),
                recorded(2, "scripted", "demo", input_tokens=7),  # free
                recorded(3, "nowhere", "no-such-model", input_tokens=9),  # no price known
            ],
        )
        report = (await client.get("/v1/usage", params={"by": "principal"})).json()
    (item,) = report["items"]
    assert item["key"] == execution.principal_id
    assert (item["input_tokens"], item["responses"], item["unpriced_responses"]) == (1016, 3, 1)
    # The price table's own answer for the one priced response, and nothing for the rest.
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=100),
        "gpt-4o",
        provider_id="openai",
        genai_request_timestamp=datetime(2026, 11, 29, 8, tzinfo=UTC),
    ).total_price
    assert expected > 0 and Decimal(item["cost_usd"]) == expected


async def test_no_route_or_dependency_runs_in_a_worker_thread(env: Env) -> None:
    # FastAPI runs a plain `def` endpoint or dependency in a thread per request: a hop
    # that cost a tenth of a webhook delivery when one dependency of every route was sync.
    def coroutine(call: Any) -> bool:
        method = type(call).__call__ if not inspect.isfunction(call) else None
        return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(method)

    sync, routes = [], list(api_routes(env.app.router.routes))
    for route in routes:
        if not isinstance(route, APIRoute | APIWebSocketRoute):
            continue
        stack = [route.dependant]
        while stack:
            dependant = stack.pop()
            stack.extend(dependant.dependencies)
            if dependant.call is not None and not coroutine(dependant.call):
                sync.append(f"{route.path}: {getattr(dependant.call, '__name__', dependant.call)}")
    assert len(routes) > 50 and sync == []


def test_the_app_holds_its_routes_flat_and_leaves_fastapis_telemetry_off(env: Env) -> None:
    # An included router is walked again per request with bookkeeping per route tried
    # (a tenth of a webhook delivery); FastAPI's telemetry asked the global providers.
    routes = env.app.router.routes
    assert not [r for r in routes if hasattr(r, "original_router")]
    assert sum(isinstance(r, APIRoute) for r in routes) > 50
    assert not env.app._native_telemetry.enabled()


def test_settle_heap_freezes_what_startup_made() -> None:
    threshold = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_THRESHOLD, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_route_that_declares_no_authorization_is_found_also_in_an_included_router() -> None:
    router = APIRouter()

    @router.get("/v1/naked")
    async def naked() -> dict[str, str]:
        return {}

    @router.get("/v1/dressed")
    async def dressed(auth: Reader) -> dict[str, str]:
        return {}

    app = FastAPI()
    app.include_router(router)
    assert unguarded(app.router.routes) == ["/v1/naked"]
