"""Model output is made safe before it becomes an event or checkpoint bytes: a provider's lone
surrogate (valid JSON, but no UTF-8 encoder takes it) becomes U+FFFD, against a real
OpenAI-compatible server and a real SQLite store."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.models import override_allow_model_requests

from opennua.runtime import AgentLoop, Completed, DerivedIds, RunEnv, default_agent, resolve_model
from opennua.runtime._checkpoint import decode, unpack
from opennua.runtime._env import Limits
from opennua.runtime.testing import InMemoryJournal
from opennua.store import Execution, open_store
from opennua.supervisor import StoreJournal
from tests.runtime.fixtures.provider import Provider, answer, provider
from tests.runtime.helpers import EXECUTION, MS, ROOT_RUN, make_loop

HELLO = "Hello \ud800 world"  # what the probe's provider streamed


@pytest.fixture
def server() -> Iterator[Provider]:
    with provider() as p:
        yield p


def _model(server: Provider):  # type: ignore[no-untyped-def]
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}
    return resolve_model("openai:gpt-4o-mini", env=env)


def _strict_utf8(journal: InMemoryJournal) -> None:
    for event in journal.log:
        json.dumps(event.data.model_dump(mode="json"), ensure_ascii=False).encode()
    for _, payload in journal._d.steps:
        raw = unpack(payload)
        assert b"\\ud8" not in raw and b"\\udc" not in raw
        json.loads(raw.decode())


async def test_a_lone_surrogate_in_text_becomes_a_replacement_character(
    server: Provider, tmp_path: Path
) -> None:
    server.replies = [answer(HELLO)]
    journal = InMemoryJournal()
    # Each delta its own batch, so the deltas reach the log rather than join the completion.
    streaming = Limits(delta_batch_seconds=0)
    loop = make_loop(
        default_agent("openai:gpt-4o-mini"), journal, tmp_path, _model(server), limits=streaming
    )
    with override_allow_model_requests(True):
        outcome = await loop.run("hi")
    assert isinstance(outcome, Completed) and outcome.output == "Hello \ufffd world"
    deltas = "".join(e.data.delta for e in journal.log if e.type == "message.delta")  # type: ignore[attr-defined]
    completed = next(e.data for e in journal.log if e.type == "message.completed")
    assert deltas == completed.text == "Hello \ufffd world"  # type: ignore[attr-defined]
    _strict_utf8(journal)
    stored = await journal.load()
    assert stored is not None
    state = decode(
        stored.full, stored.steps, snapshot_digest=loop.agent.digest, root_run_id=ROOT_RUN
    )
    assert state.runs[ROOT_RUN].output == "Hello \ufffd world"


async def test_tool_call_arguments_are_made_safe_too(server: Provider, tmp_path: Path) -> None:
    args = json.dumps({"path": "n\ud800.txt", "content": "x\udc80y"})  # escaped, as sent
    server.replies = [answer(tool=("write_file", args)), answer("done")]
    journal = InMemoryJournal()
    loop = make_loop(default_agent("openai:gpt-4o-mini"), journal, tmp_path, _model(server))
    with override_allow_model_requests(True):
        outcome = await loop.run("write it")
    assert isinstance(outcome, Completed)
    started = next(e.data for e in journal.log if e.type == "tool_call.started")
    assert started.input == {"path": "n\ufffd.txt", "content": "x\ufffdy"}  # type: ignore[attr-defined]
    assert (tmp_path / "n\ufffd.txt").read_text() == "x\ufffdy"
    _strict_utf8(journal)
    # What went back to the provider is valid too (the second request echoes the call).
    assert "\ufffd" in json.dumps(server.requests[1], ensure_ascii=False)


async def test_the_turn_completes_on_a_real_store_and_writes_go_on(
    server: Provider, tmp_path: Path
) -> None:
    server.replies = [answer(HELLO)]
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        now = time.time()
        await store.create_session("ses_01JSURR0000000000000000", created_at=now)
        await store.create_execution(
            Execution(
                execution_id=EXECUTION,
                session_id="ses_01JSURR0000000000000000",
                turn_id="trn_01JSURR0000000000000000",
                status="queued",
                created_at=now,
            )
        )
        claimed = await store.claim("sup_t", now, 60.0)
        assert claimed is not None
        journal = StoreJournal(store, claimed, owner="sup_t", clock=time.time)
        env = RunEnv(
            execution_id=EXECUTION,
            root_run_id=ROOT_RUN,
            workdir=tmp_path,
            ids=DerivedIds(EXECUTION, ms=MS),
        )
        loop = AgentLoop(default_agent("openai:gpt-4o-mini"), journal, env, model=_model(server))
        with override_allow_model_requests(True):
            outcome = await loop.run("hi")
        assert isinstance(outcome, Completed) and outcome.output == "Hello \ufffd world"
        texts = [
            a["data"].get("text") or a["data"].get("delta")
            for a in await store.read("ses_01JSURR0000000000000000", 0, 100)
            if a["type"] in ("message.delta", "message.completed")
        ]
        assert texts and all(t == "Hello \ufffd world" for t in texts)
        # The store still takes writes (one bad string used to stop them all).
        await store.create_session("ses_01JSURR0000000000000001", created_at=time.time())
