"""The gateway's checks, one by one, in process over a real store: the upstream is a small
ASGI app that records exactly what reached it (which headers, which body), so "no token
passthrough" and "only the credential's header" are observed, not assumed."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import aiohttp.abc
import httpx
import httpx2
import mcp_types
import pytest
import uvicorn

from opennua.auth import LEGACY_ID, Authority
from opennua.gateway import PATH, Gateway, Redactor, _proxy, issue_ticket
from opennua.gateway._redact import escaped_pattern
from opennua.gateway._resolve import Address
from opennua.host import Actor, DeploymentSpec, Hub, Scope, SessionHost
from opennua.protocol import CreateSession, SendMessage
from opennua.protocol.actions import TextPart
from opennua.runtime._env import GatewayRoute
from opennua.runtime._mcp import _result_text, gateway_client
from opennua.secrets import SecretKey, SecretStore
from opennua.store import DeploymentRecord, Store, open_store

TOKEN = "owner-token-for-checks"
VALUE = 'v@lue "with" \\ quotes-0c9b'
#: The remote servers of these tests listen on loopback, which the gateway reaches only where
#: a deployment lists it as an address (docs/gateway.md, "What the gateway checks").
LOOPBACK = "127.0.0.1:1-65535"


@dataclass
class Upstream:
    seen: list[dict[str, Any]] = field(default_factory=list)
    #: When set, a request waits for it before it is answered (a call still in flight).
    hold: asyncio.Event | None = None
    #: When set, the answer instead: (content type, body chunks) for the credential.
    reply: Callable[[str], tuple[str, list[bytes]]] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append({"headers": headers, "body": body, "path": scope["path"]})
        if self.hold is not None:
            await self.hold.wait()
        request = json.loads(body)
        if self.reply is not None:
            media_type, chunks = self.reply(headers["x-api-key"])
            start = [(b"content-type", media_type.encode())]
            await send({"type": "http.response.start", "status": 200, "headers": start})
            for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        # A service that echoes everything it got, the credential included (escaped by
        # its JSON encoder), in a result and in a response header.
        text = json.dumps(headers)
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result})
        out = [(b"content-type", b"application/json"), (b"x-echo", headers["x-api-key"].encode())]
        await send({"type": "http.response.start", "status": 200, "headers": out})
        await send({"type": "http.response.body", "body": answer.encode()})


@dataclass
class World:
    store: Store
    gateway: Gateway
    upstream: Upstream
    ticket: str
    execution_id: str
    epoch: int
    host: SessionHost
    actor: Actor
    secrets: SecretStore
    workspace_id: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.gateway), base_url="http://gateway"
        )


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "checks", "version": "1.0.0"}')
    (root / "AGENTS.md").write_text("Checks.\n")
    # "team notes": a name as published, its tools named by a prefix (team_notes__…).
    mcp = {
        "notes": {"url": "http://upstream.test/mcp"},
        "team notes": {"url": "http://upstream.test/mcp"},
    }
    (root / ".mcp.json").write_text(json.dumps(mcp))
    # Remote A2A agents: `helper` the policy allows, `other` it does not.
    agents = {
        "helper": {"url": "http://upstream.test/a2a"},
        "other": {"url": "http://upstream.test/o"},
    }
    (root / ".a2a.json").write_text(json.dumps({"agents": agents}))
    (root / "opennua.toml").write_text(
        '[access]\negress = ["upstream.test"]\n'
        'allowed-tools = ["notes__lookup", "team_notes__lookup", "helper__send_message"]\n'
    )
    return root


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    url = f"sqlite:///{tmp_path}/nua.db"
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
    async with await open_store(url, data_dir=tmp_path) as store:
        secrets = await SecretStore.open(store, SecretKey.generate())
        authority = Authority(store)
        await authority.bootstrap(TOKEN)
        caller = await authority.authenticate(TOKEN)
        workspace = caller.default_workspace
        assert workspace is not None
        host = SessionHost(store, Hub(store), grant_check=authority.grant_problem)
        await host.registry.ensure_builtin("scripted:demo")
        await host.registry.publish_dir(_plugin(tmp_path / "plugin"))
        await host.registry.release("checks", "stable", "1.0.0")
        await secrets.put(workspace, "api-key", VALUE)
        ref = {"server": "notes", "secret": "api-key", "header": "X-Api-Key", "prefix": ""}
        team = ref | {"server": "team notes"}
        helper = ref | {"server": "helper"}
        spec = DeploymentSpec.model_validate(
            {
                "plugin": "checks",
                "model": "scripted:demo",
                "credentials": [ref, team, helper],
                # The remote servers listen on loopback: an admin's address entry.
                "egress": [LOOPBACK],
            }
        )
        await host.registry.deploy("checks", spec, Scope(workspace, caller.principal_id))
        actor = Actor(
            caller.principal_id,
            workspace,
            authority.grant_for(caller, workspace, model=None),
        )
        created = await host.submit(
            None,
            CreateSession(intent_id="int_c", client_id="cli_t", deployment="checks"),
            actor=actor,
        )
        sid = str(created.ids["session_id"])  # type: ignore[union-attr]
        content = [TextPart(text="go")]
        sent = await host.submit(
            sid, SendMessage(intent_id="int_m", client_id="cli_t", content=content), actor=actor
        )
        execution_id = str(sent.ids["execution_id"])  # type: ignore[union-attr]
        claimed = await store.claim("sup_t", time.time(), 600.0)
        assert claimed is not None
        ticket = await issue_ticket(store, execution_id, claimed.epoch, time.time())
        upstream = Upstream()
        async with _serving(upstream) as port:
            gateway = Gateway(
                store, secrets, upstream=lambda: _session_to(port), addresses=_at_localhost
            )
            try:
                yield World(
                    store,
                    gateway,
                    upstream,
                    ticket,
                    execution_id,
                    claimed.epoch,
                    host,
                    actor,
                    secrets,
                    workspace,
                )
            finally:
                await gateway.aclose()


@contextlib.asynccontextmanager
async def _serving(app: Any) -> AsyncIterator[int]:
    """`app` served by uvicorn on a free port of 127.0.0.1, as a remote server is."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


class _ToLocalhost(aiohttp.abc.AbstractResolver):
    """Every name resolves to the test's upstream on 127.0.0.1: the plugin's egress list
    and the audit keep the name `upstream.test`, as they would a real host's."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        return [
            {"hostname": host, "host": "127.0.0.1", "port": self.port,
             "family": socket.AF_INET, "proto": 0, "flags": 0}
        ]  # fmt: skip

    async def close(self) -> None:
        pass


async def _at_localhost(host: str, port: int) -> list[Address]:
    """What `_ToLocalhost` connects every name to, as the gateway's address check sees it."""
    return [ipaddress.ip_address("127.0.0.1")]


def _session_to(port: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(resolver=_ToLocalhost(port))
    return aiohttp.ClientSession(connector=connector, skip_auto_headers=("Content-Type",))


def _call(tool: str, id_: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}  # fmt: skip


async def _post(
    world: World, body: dict[str, Any], ticket: str | None = None, server: str = "notes"
) -> httpx.Response:
    async with world.client() as c:
        return await c.post(
            PATH + quote(server, safe=""),
            json=body,
            headers={
                "Authorization": f"Bearer {ticket or world.ticket}",
                "Accept": "application/json, text/event-stream",
                "Cookie": "session=browser-cookie",
                "X-Forwarded-For": "10.0.0.1",
            },
        )


async def test_only_the_credential_reaches_upstream_and_comes_back_redacted(world: World) -> None:
    answer = await _post(world, _call("lookup"))
    assert answer.status_code == 200, answer.text
    [seen] = world.upstream.seen
    # No token passthrough: the ticket, the cookie and other caller headers stay behind.
    assert seen["headers"]["x-api-key"] == VALUE
    assert "authorization" not in seen["headers"] and "cookie" not in seen["headers"]
    assert "x-forwarded-for" not in seen["headers"]
    assert world.ticket.encode() not in seen["body"]
    # The echo (JSON-escaped in the body, raw in a header) is redacted by name.
    twice = json.dumps(json.dumps(VALUE)[1:-1])[1:-1]
    assert VALUE not in answer.text and twice not in answer.text
    assert "[redacted:api-key]" in answer.text
    assert "x-echo" not in answer.headers  # only the MCP transport's headers come back
    await world.gateway.audit.flush()
    [record] = await world.store.list_audit(execution_id=world.execution_id)
    assert (record.tool, record.credential, record.outcome) == ("lookup", "api-key", "ok")
    assert record.host == "upstream.test"


async def test_a_call_its_caller_cancels_in_flight_is_audited(world: World) -> None:
    # In `nua serve --role all` the runtime hands each request to the gateway in its own
    # task: a cancelled turn cancels the forward after the service may have acted on it.
    world.upstream.hold = asyncio.Event()
    call = asyncio.create_task(_post(world, _call("lookup")))
    while not world.upstream.seen:
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    world.upstream.hold.set()
    await world.gateway.audit.flush()
    [record] = await world.store.list_audit(execution_id=world.execution_id)
    assert (record.tool, record.outcome, record.code) == ("lookup", "error", "cancelled")
    assert record.credential == "api-key" and record.latency_ms > 0


async def test_the_runtime_reaches_a_gateway_in_its_process_without_the_network(
    world: World,
) -> None:
    # The URL is where nothing listens: only the in-process route can answer.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"
    route = GatewayRoute(nowhere, world.ticket, app=world.gateway)
    async with gateway_client(route) as http:
        answer = await http.post(
            f"{nowhere}{PATH}notes", json=_call("lookup"), headers={"Accept": "application/json"}
        )
    assert answer.status_code == 200, answer.text
    assert "[redacted:api-key]" in answer.text and VALUE not in answer.text
    [seen] = world.upstream.seen
    assert seen["headers"]["x-api-key"] == VALUE and "authorization" not in seen["headers"]
    # Without the app the same route goes over HTTP, to where nothing listens.
    async with gateway_client(GatewayRoute(nowhere, world.ticket)) as http:
        with pytest.raises(httpx2.ConnectError):
            await http.post(f"{nowhere}{PATH}notes", json=_call("lookup"))


async def test_a_tool_outside_the_policy_is_refused_and_never_forwarded(world: World) -> None:
    answer = await _post(world, _call("forget"))
    assert answer.status_code == 200
    error = answer.json()["error"]
    assert error["data"]["code"] == "tool_not_allowed" and "notes__forget" in error["message"]
    assert world.upstream.seen == []
    await world.gateway.audit.flush()
    [record] = await world.store.list_audit(execution_id=world.execution_id)
    assert (record.outcome, record.code, record.tool) == ("refused", "tool_not_allowed", "forget")


async def test_a_server_named_as_published_is_reached_by_its_name_and_checked_by_its_prefix(
    world: World,
) -> None:
    # The runtime puts the name as written in the path; the policy names its tools by
    # the prefix the model sees them with.
    allowed = await _post(world, _call("lookup"), server="team notes")
    assert allowed.status_code == 200, allowed.text
    assert "[redacted:api-key]" in allowed.text and len(world.upstream.seen) == 1
    refused = await _post(world, _call("forget"), server="team notes")
    error = refused.json()["error"]
    assert error["data"]["code"] == "tool_not_allowed"
    assert "team_notes__forget is not an allowed tool" in error["message"]
    assert len(world.upstream.seen) == 1


async def test_a_tool_name_that_is_not_utf8_is_refused_and_audited_like_any(
    world: World,
) -> None:
    body = _call("lookup")
    body["params"]["name"] = "\ud800x"  # a lone surrogate: valid JSON, not UTF-8
    async with world.client() as c:
        answer = await c.post(
            f"{PATH}notes",
            content=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {world.ticket}"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["error"]["data"]["code"] == "tool_not_allowed"
    assert world.upstream.seen == []
    # Its audit record is written, and does not hold up the records after it.
    assert (await _post(world, _call("lookup"))).status_code == 200
    await world.gateway.audit.flush()
    records = await world.store.list_audit(execution_id=world.execution_id)
    assert sorted((r.tool, r.outcome) for r in records) == [
        ("?x", "refused"),
        ("lookup", "ok"),
    ]


async def test_a_call_after_the_grant_broke_is_refused_and_never_forwarded(world: World) -> None:
    """The gateway judges the grant at every call, from the store (no cache): the token the
    turn was started with, revoked by any process, refuses the very next call."""
    assert (await _post(world, _call("lookup"))).status_code == 200
    await world.store.revoke_token(LEGACY_ID, time.time())  # the token TOKEN is
    refused = await _post(world, _call("lookup"))
    assert refused.json()["error"]["data"]["code"] == "grant_revoked", refused.text
    assert len(world.upstream.seen) == 1
    await world.gateway.audit.flush()
    records = await world.store.list_audit(execution_id=world.execution_id)
    assert sorted((r.outcome, r.code) for r in records) == [
        ("ok", None),
        ("refused", "grant_revoked"),
    ]


async def test_a_ticket_of_an_earlier_attempt_or_a_forged_one_is_refused(world: World) -> None:
    assert (await _post(world, _call("lookup"))).status_code == 200  # known and cached now
    # The next attempt (epoch + 1) gets its own ticket: the old one no longer works.
    await world.store.release(world.execution_id, world.epoch)
    claimed = await world.store.claim("sup_t2", time.time(), 600.0)
    assert claimed is not None and claimed.epoch == world.epoch + 1
    fresh = await issue_ticket(world.store, world.execution_id, claimed.epoch, time.time())
    stale = await _post(world, _call("lookup"))
    assert stale.json()["error"]["data"]["code"] == "execution_not_running"
    assert (await _post(world, _call("lookup"), ticket=fresh)).status_code == 200
    forged = fresh[:-2] + ("AA" if not fresh.endswith("AA") else "BB")
    refused = await _post(world, _call("lookup"), ticket=forged)
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    async with world.client() as c:
        anonymous = await c.post(f"{PATH}notes", content=b"{}")
        assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthorized"
        assert (await c.get(f"{PATH}notes")).status_code == 405


async def test_what_the_gateway_holds_per_execution_stays_bounded(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_proxy, "_HELD", 1)
    other_sid = str(
        (
            await world.host.submit(
                None,
                CreateSession(intent_id="int_c2", client_id="cli_t", deployment="checks"),
                actor=world.actor,
            )
        ).ids["session_id"]  # type: ignore[union-attr]
    )
    content = [TextPart(text="again")]
    sent = await world.host.submit(
        other_sid,
        SendMessage(intent_id="int_m2", client_id="cli_t", content=content),
        actor=world.actor,
    )
    other = str(sent.ids["execution_id"])  # type: ignore[union-attr]
    claimed = await world.store.claim("sup_t2", time.time(), 600.0)
    assert claimed is not None and claimed.execution.execution_id == other
    ticket = await issue_ticket(world.store, other, claimed.epoch, time.time())
    for _ in range(2):  # each call re-learns what the other emptied, and still passes
        assert (await _post(world, _call("lookup"))).status_code == 200
        assert (await _post(world, _call("lookup"), ticket=ticket)).status_code == 200
        assert len(world.gateway._tickets) <= 1 and len(world.gateway._session_of) <= 1
    assert len(world.upstream.seen) == 4


async def forged_ticket(
    world: World, tools: dict[str, Any], egress: list[str] | None = None
) -> tuple[str, str]:
    """(execution id, ticket) of a running execution whose configuration was written
    around the registry's deploy-time checks, with these `tools` overrides (and this
    `egress` list, if given)."""
    good = await world.store.get_deployment("checks")
    spec = {**good.spec, "tools": tools} | ({} if egress is None else {"egress": egress})
    forged = DeploymentRecord(name="forged", digest="sha256:forged", spec=spec,
                              created_at=1.0, workspace_id=good.workspace_id)  # fmt: skip
    await world.store.put_deployment(forged)
    created = await world.host.submit(
        None,
        CreateSession(intent_id="int_f", client_id="cli_t", deployment="forged"),
        actor=world.actor,
    )
    sid = str(created.ids["session_id"])  # type: ignore[union-attr]
    content = [TextPart(text="go")]
    sent = await world.host.submit(
        sid, SendMessage(intent_id="int_f2", client_id="cli_t", content=content), actor=world.actor
    )
    execution_id = str(sent.ids["execution_id"])  # type: ignore[union-attr]
    claimed = await world.store.claim("sup_t", time.time(), 600.0)
    assert claimed is not None and claimed.execution.execution_id == execution_id
    return execution_id, await issue_ticket(world.store, execution_id, claimed.epoch, time.time())


async def test_a_host_outside_the_egress_list_is_refused_at_call_time(world: World) -> None:
    # Its override points the server elsewhere. The gateway checks egress on every call.
    tools = {"notes": {"url": "http://evil.example/mcp"}}
    execution_id, ticket = await forged_ticket(world, tools)
    answer = await _post(world, _call("lookup"), ticket=ticket)
    error = answer.json()["error"]
    assert error["data"]["code"] == "egress_denied" and "evil.example" in error["message"]
    assert world.upstream.seen == []  # the credential went nowhere
    await world.gateway.audit.flush()
    [record] = await world.store.list_audit(execution_id=execution_id)
    assert (record.outcome, record.code, record.credential) == ("refused", "egress_denied", None)


@pytest.mark.parametrize("egress", [[], ["127.0.0.2:1-65535"], ["upstream.test:80"]])
async def test_a_private_address_is_reached_only_where_the_deployment_lists_it(
    world: World, egress: list[str]
) -> None:
    # The plugin lists upstream.test, which resolves to 127.0.0.1 here: without an admin's
    # entry for that address (another address, or the name, is not one), the gateway does
    # not call it, as the egress proxy would not connect sandboxed code to it.
    tools = {"notes": {"url": "http://upstream.test/mcp"}}
    execution_id, ticket = await forged_ticket(world, tools, egress=egress)
    error = (await _post(world, _call("lookup"), ticket=ticket)).json()["error"]
    assert error["data"]["code"] == "egress_address_denied"
    assert "upstream.test resolves to 127.0.0.1" in error["message"]
    assert world.upstream.seen == []  # nothing was sent, the credential least of all
    await world.gateway.audit.flush()
    [record] = await world.store.list_audit(execution_id=execution_id)
    assert (record.outcome, record.code) == ("refused", "egress_address_denied")


async def test_a_secret_replaced_or_deleted_between_calls_is_never_sent_stale(
    world: World,
) -> None:
    # The gateway keeps the values it opened, but each call uses the sealed row it read
    # itself: a replaced value goes out (and is redacted) from the next call on, and a
    # deleted secret refuses the next call.
    for _ in range(3):  # resolves the session, then opens the row, then reuses it
        assert (await _post(world, _call("lookup"))).status_code == 200
    rotated = "r0tated-value-5e1d"
    await world.secrets.put(world.workspace_id, "api-key", rotated)
    answer = await _post(world, _call("lookup"))
    assert answer.status_code == 200
    assert world.upstream.seen[-1]["headers"]["x-api-key"] == rotated
    assert rotated not in answer.text and "[redacted:api-key]" in answer.text
    await world.secrets.delete(world.workspace_id, "api-key")
    refused = await _post(world, _call("lookup"))
    assert refused.json()["error"]["data"]["code"] == "secret_missing"
    assert len(world.upstream.seen) == 4  # the refused call reached nothing
    await world.secrets.put(world.workspace_id, "api-key", VALUE)
    assert (await _post(world, _call("lookup"))).status_code == 200
    assert [s["headers"]["x-api-key"] for s in world.upstream.seen] == [VALUE] * 3 + [
        rotated,
        VALUE,
    ]


def test_redaction_covers_raw_and_json_escaped_values() -> None:
    redact = Redactor({"k": VALUE, "short": "abc"})
    raw = f"x{VALUE}y".encode()
    escaped = json.dumps({"v": VALUE + "é"}, ensure_ascii=False).encode()
    twice = json.dumps({"text": json.dumps({"v": VALUE})}).encode()
    for data in (raw, escaped, twice):
        out = redact.body(data, "application/json")
        assert VALUE.encode() not in out and b"[redacted:k]" in out
    assert redact.text("abcabc") == "[redacted:short][redacted:short]"
    assert not Redactor({})


def test_redaction_reads_the_body_as_a_decoder_does() -> None:
    redact = Redactor({"k": "s3cr/et"})
    # A key, a non-JSON body, an SSE event whose JSON spans two data lines.
    keyed = redact.body(b'{"s3cr\\u002Fet": 1}', "application/json")
    assert json.loads(keyed) == {"[redacted:k]": 1}
    assert redact.body(b"got s\\u0033cr\\/et", "text/plain") == b"got [redacted:k]"
    sse = b'event: message\ndata: {"a":\ndata: "s3cr\\/et"}\n\n'
    assert b'data: {"a":"[redacted:k]"}' in redact.body(sse, "text/event-stream")
    # Nothing to redact: the very bytes come back.
    clean = b'{"jsonrpc":"2.0","id":1,"result":{"text":"a \\"quoted\\" \\u00e9"}}'
    assert redact.body(clean, "application/json") is clean
    # A value seen only across the structure, or as a number, cannot be cut out of one
    # string: the message is withheld as an error answering its id.
    for value, body in (
        ('x","y', b'{"id":3,"result":{"a":"x","y":1}}'),
        ("482913", b'{"id":3,"result":{"code":482913}}'),
    ):
        withheld = json.loads(Redactor({"k": value}).body(body, "application/json"))
        assert withheld["id"] == 3 and withheld["error"]["data"]["code"] == "credential_withheld"
        assert value not in json.dumps(withheld)


#: A credential with a character of each kind a JSON encoder may escape: `/` (`\/`), a
#: quote and a backslash (short escapes), letters in both cases (`\u` hex in either case).
CANARY = 'c4n/ary+Tok"en\\x-Z'


def _esc(value: str, form: str) -> str:
    """`value` as a JSON string's inside, escaped as a quirky encoder would."""

    def one(n: int, c: str) -> str:
        short = {"/": "\\/", '"': '\\"', "\\": "\\\\"}
        if form == "slash":
            return short.get(c, c)
        if form in ("lower", "upper"):
            code = f"{ord(c):04x}"
            return "\\u" + (code.upper() if form == "upper" else code)
        # mixed: raw, \u lower, \u upper, short escapes, in turn
        code = f"{ord(c):04x}"
        options = [short.get(c, c), "\\u" + code, "\\u" + code.upper()]
        return options[n % 3]

    return "".join(one(n, c) for n, c in enumerate(value))


def _result(text_inside: str) -> str:
    return (
        '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"got '
        + text_inside
        + '"}],"isError":false}}'
    )


def _replies() -> dict[str, Callable[[str], tuple[str, list[bytes]]]]:
    json_type = "application/json"

    def sse(value: str) -> tuple[str, list[bytes]]:
        event = ("event: message\r\ndata: " + _result(_esc(value, "mixed")) + "\r\n\r\n").encode()
        cut = event.index(b"\\u") + 3  # in the middle of an escape of the credential
        middle = cut + (len(event) - cut) // 2
        return "text/event-stream", [event[:cut], event[cut:middle], event[middle:]]

    def twice(value: str) -> tuple[str, list[bytes]]:
        # A tool's JSON text (the credential escaped in it) inside the JSON-RPC answer.
        inner = '{"token":"' + _esc(value, "upper") + '"}'
        return json_type, [_result(json.dumps(inner)[1:-1]).encode()]

    replies: dict[str, Callable[[str], tuple[str, list[bytes]]]] = {
        form: (lambda v, f=form: (json_type, [_result(_esc(v, f)).encode()]))
        for form in ("slash", "lower", "upper", "mixed")
    }
    return {**replies, "sse": sse, "twice": twice}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    return []


async def test_a_credential_echoed_in_any_json_escaping_comes_back_redacted(
    world: World,
) -> None:
    """Issue 29: a service echoing the credential as `\\/` or `\\uXXXX` (either case,
    mixed, escaped twice, split across the chunks of an SSE answer) got it into the tool
    output, the model's request, the log, the API and `nua show` — all of which are the
    text the runtime derives from the decoded answer, checked here as the runtime makes it."""
    await world.secrets.put(world.workspace_id, "api-key", CANARY)
    for form, reply in _replies().items():
        world.upstream.reply = reply
        answer = await _post(world, _call("lookup"))
        assert answer.status_code == 200, (form, answer.text)
        assert re.search(escaped_pattern(CANARY), answer.text) is None, form
        if form == "sse":
            data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
            [message] = [json.loads(d) for d in data]
        else:
            message = json.loads(answer.text)
        # What the MCP client decodes, and the tool output the runtime makes of it.
        parsed = mcp_types.JSONRPCResponse.model_validate(message)
        result = mcp_types.CallToolResult.model_validate(parsed.result)
        output = _result_text(result)
        assert "[redacted:api-key]" in output, (form, output)
        decoded = [*_strings(message), output, json.dumps(message)]
        if form == "twice":
            decoded += _strings(json.loads(output.removeprefix("got ")))
        assert not [s for s in decoded if CANARY in s], form
    assert [s["headers"]["x-api-key"] for s in world.upstream.seen] == [CANARY] * 6
