"""Child process of test_crash.py: append forever, print each seq once it is committed.

Several writers append concurrently so that, on SQLite, group-commit batches holding
many callers' rows are in flight when the parent SIGKILLs this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

from opennua.store import WriteConflict, open_store


async def main(url: str, session_id: str) -> None:
    async with await open_store(url) as store:
        with contextlib.suppress(WriteConflict):  # a previous child created it
            await store.create_session(session_id, created_at=0.0)
        pid = os.getpid()

        async def writer(w: int) -> None:
            n = 0
            while True:
                n += 1
                action_id = f"act_{pid}_{w}_{n}"
                body = {"id": action_id, "type": "message.delta", "data": {"delta": "x" * 200}}
                (seq,) = await store.append(session_id, [body])
                # Printed only after append returned, i.e. after the commit holding it.
                print(seq, action_id, flush=True)

        await asyncio.gather(*(writer(w) for w in range(4)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
