"""ACP through `nua acp`: time to the first `session/update` and updates per second.

    python benchmarks/protocols_acp.py [--turns 5]

An editor (the `agent-client-protocol` SDK's client side) starts one `nua acp` subprocess
against a running `nua serve` and, per turn, opens a session and prompts the demo task,
approving its one shell command at once. Measured on the editor's side of the pipe:
  * first update: from sending `session/prompt` to the first `session/update` (the turn's
    acceptance, its claim by a supervisor, the first thought, and both hops: SSE to
    `nua acp`, stdio to the editor);
  * updates/s: updates received over the time from the first update to the prompt's
    response (the approval's round trip included, as an editor lives it).
`measure()` is what benchmarks/protocols.py calls; run alone, this starts its own
`nua serve` (the zero-delay scripted demo) in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, text_block
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from acp.stdio import spawn_agent_process

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import serve_demo

DEMO = "Write a short report"


class _Editor:
    def __init__(self) -> None:
        self.first: float | None = None
        self.count = 0

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.count += 1

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        chosen = next(o.option_id for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def on_connect(self, conn: Any) -> None:
        pass


async def measure(base_url: str, token: str, deployment: str, turns: int) -> dict[str, float]:
    """p50 ms to the first update, and median updates/s, over `turns` demo turns."""
    editor = _Editor()
    args = ["-m", "opennua.cli", "--url", base_url, "--token", token, "acp"]
    if deployment:
        args += ["--deployment", deployment]
    firsts: list[float] = []
    rates: list[float] = []
    async with spawn_agent_process(
        editor, sys.executable, *args, transport_kwargs={"stderr": subprocess.DEVNULL}
    ) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        for _ in range(turns):
            sid = (await conn.new_session(cwd=os.getcwd())).session_id
            editor.first, editor.count = None, 0
            sent = time.perf_counter()
            done = await conn.prompt(session_id=sid, prompt=[text_block(DEMO)])
            ended = time.perf_counter()
            assert done.stop_reason == "end_turn", done
            assert editor.first is not None and editor.count > 1
            firsts.append((editor.first - sent) * 1000)
            rates.append(editor.count / max(ended - editor.first, 1e-9))
    return {
        "first_update_p50_ms": statistics.median(firsts),
        "updates_per_s": statistics.median(rates),
        "turns": float(turns),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = serve_demo(Path(tmp))
        try:
            token = (Path(tmp) / "token").read_text().strip()
            got = asyncio.run(measure(url, token, "", args.turns))
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"ACP (nua acp), {args.turns} demo turns:")
    print(f"  first session/update p50: {got['first_update_p50_ms']:.0f} ms")
    print(f"  updates/s (median):       {got['updates_per_s']:.0f}")


if __name__ == "__main__":
    main()
