"""One "machine" for tests/supervisor/test_workspace_failover.py: a supervisor process with
its own data directory (workspace root), on a shared PostgreSQL store, running a scripted
agent that writes a file, then runs a command that writes another and sleeps.

    python -m tests.supervisor._machine POSTGRES_URL DATA_DIR SUPERVISOR_ID
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from opennua.runtime import Sandbox, default_agent
from opennua.runtime.testing import ScriptedModel, ScriptStep, call, say
from opennua.store import open_store
from opennua.supervisor import Supervisor

NOTES = "# Notes\n\ncommitted before the crash\n"
SCRIPT = (
    ScriptStep(calls=(call("write_file", path="notes.md", content=NOTES),)),
    ScriptStep(calls=(call("shell", command="echo draft > draft.md && sleep 60"),)),
    say("done"),
)


async def main(url: str, data_dir: str, supervisor_id: str) -> None:
    async with await open_store(url, data_dir=data_dir) as store:
        supervisor = Supervisor(
            store,
            default_agent("scripted:demo"),
            supervisor_id=supervisor_id,
            data_dir=Path(data_dir),
            ttl=2,
            poll_interval=0.1,
            model=ScriptedModel(SCRIPT),
            sandbox=Sandbox("none"),
        )
        print("ready", flush=True)
        await supervisor.run()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    asyncio.run(main(*sys.argv[1:4]))
