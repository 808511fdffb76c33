"""An artifact has its own state, apart from the turn's: the blob store refusing writes at
publish time leaves a *completed* turn with a *failed* artifact (CLI and history say both),
and a retry through the Host publishes it — real SQLite store, real file blob backend made
unwritable the way a full or read-only disk is, real supervisor."""

from __future__ import annotations

import asyncio
import hashlib
import io
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage

from opennua.cli._render import render_session
from opennua.cli._safe import SafeConsole
from opennua.host import Hub, SessionHost
from opennua.runtime import default_agent
from opennua.runtime._scripted import first_prompt
from opennua.runtime.testing import ScriptedModel, ScriptStep, call, say
from opennua.store import NotFound, Store, open_store
from tests._support.polling import until
from tests._support.supervisor import (
    EID,
    EID2,
    SID,
    accept,
    make_supervisor,
    second_turn,
    session_state,
)

REPORT = "# Q3\n\nAll good.\n"


def _script(messages: list[ModelMessage]) -> ScriptStep:
    responses = sum(m.kind == "response" for m in messages)
    if "quarterly report" in first_prompt(messages):
        steps = [ScriptStep(calls=(call("write_file", path="a.md", content="x"),)), say("ok")]
    else:
        steps = [
            ScriptStep(calls=(call("publish_artifact", name="q3.md", content=REPORT),)),
            say("published"),
        ]
    return steps[min(responses, len(steps) - 1)]


def _completed(store: Store, eid: str) -> Any:
    async def check() -> bool:
        return (await store.get_execution(eid)).status == "completed"

    return check


def _shown(state: Any) -> str:
    out = io.StringIO()
    SafeConsole(file=out, width=200).print(render_session(state))
    return out.getvalue()


async def test_a_failed_upload_leaves_the_turn_completed_and_a_retry_publishes(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(
            store, tmp_path, default_agent("scripted:test"), model=ScriptedModel(_script)
        )
        runner = asyncio.create_task(supervisor.run())
        blobs_tmp = tmp_path / "blobs" / "tmp"
        try:
            await until(_completed(store, EID))
            # The blob directory stops taking writes (reads still work): as root, a mode
            # would not stop us, so its upload folder becomes a file.
            shutil.rmtree(blobs_tmp)
            blobs_tmp.write_text("not a directory")
            await second_turn(store, time.time())
            supervisor.nudge()
            await until(_completed(store, EID2))
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

        state = await session_state(store)
        turn = state["turns"][1]
        assert turn["stop_reason"] == "end_turn"
        (artifact,) = state["artifacts"].values()
        assert artifact["state"] == "failed", artifact
        assert artifact["error"]["code"] == "blobs_unavailable"
        assert artifact["sha256"] == hashlib.sha256(REPORT.encode()).hexdigest()
        (call_,) = turn["tool_calls"].values()
        assert call_["status"] == "completed" and "upload failed" in call_["output"]
        # Not downloadable: no artifact record until its bytes are durable.
        with pytest.raises(NotFound):
            await store.get_artifact(artifact["artifact_id"])
        shown = _shown(state)
        assert "▣ artifact q3.md" in shown and "· upload failed: the blob" in shown, shown
        assert "end_turn" in shown or "completed" in shown, shown

        host = SessionHost(store, Hub(store))
        # Still unwritable: the retry says so and stays failed.
        again = await host.retry_artifact(SID, artifact["artifact_id"])
        assert again["state"] == "failed" and again["error"]["code"] == "blobs_unavailable"

        blobs_tmp.unlink()
        blobs_tmp.mkdir(mode=0o700)
        published = await host.retry_artifact(SID, artifact["artifact_id"])
        assert published["state"] == "published" and published["error"] is None
        record, data = await host.artifact_content(artifact["artifact_id"])
        assert data == REPORT.encode() and record.turn_id == turn["turn_id"]

        # The log says what happened, in order; history replays to the same state.
        updates = [
            a["data"]["state"]
            for a in await store.read(SID, 0, 1000)
            if a["type"] == "artifact.updated"
        ]
        assert updates == ["pending", "failed", "pending", "published"]
        final = await session_state(store)
        assert final["turns"][1]["stop_reason"] == "end_turn"
        assert final["artifacts"][artifact["artifact_id"]]["state"] == "published"
        assert "· upload failed" not in _shown(final)
        # A retry of a published artifact changes nothing.
        assert (await host.retry_artifact(SID, artifact["artifact_id"]))["state"] == "published"
        with pytest.raises(NotFound):
            await host.retry_artifact(SID, "art_unknown")
