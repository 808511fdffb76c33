"""A running execution of a deployment with an egress list, over a real store, and its
gateway ticket: what the egress proxy's tests and benchmarks/egress.py start from."""

from __future__ import annotations

import asyncio
import time

from opennua.auth import Authority
from opennua.gateway import issue_ticket
from opennua.host import Actor, DeploymentSpec, Hub, Scope, SessionHost
from opennua.plugins import builtin_plugin_root, read_plugin
from opennua.protocol import CreateSession, SendMessage
from opennua.protocol.actions import TextPart
from opennua.store import Store

TOKEN = "owner-token-for-egress"


async def running_execution(store: Store, egress: list[str]) -> tuple[str, str]:
    """(execution id, ticket) of a claimed execution whose deployment lists `egress`."""
    authority = Authority(store)
    await authority.bootstrap(TOKEN)
    caller = await authority.authenticate(TOKEN)
    workspace = caller.default_workspace
    assert workspace is not None
    host = SessionHost(store, Hub(store), grant_check=authority.grant_problem)
    await host.registry.ensure_builtin("scripted:demo")
    builtin = (await asyncio.to_thread(read_plugin, builtin_plugin_root())).name
    spec = DeploymentSpec.model_validate(
        {"plugin": builtin, "model": "scripted:demo", "egress": egress}
    )
    await host.registry.deploy("net", spec, Scope(workspace, caller.principal_id))
    actor = Actor(
        caller.principal_id, workspace, authority.grant_for(caller, workspace, model=None)
    )
    created = await host.submit(
        None, CreateSession(intent_id="int_c", client_id="cli_t", deployment="net"), actor=actor
    )
    sid = str(created.ids["session_id"])  # type: ignore[union-attr]
    message = SendMessage(intent_id="int_m", client_id="cli_t", content=[TextPart(text="x")])
    sent = await host.submit(sid, message, actor=actor)
    execution_id = str(sent.ids["execution_id"])  # type: ignore[union-attr]
    claimed = await store.claim("sup_t", time.time(), 3600.0)
    assert claimed is not None and claimed.execution.execution_id == execution_id
    return execution_id, await issue_ticket(store, execution_id, claimed.epoch, time.time())
