"""The private PostgreSQL cluster of the chaos tests (tests/e2e/_pgcluster.py): the
postmaster is SIGKILLed and started again on the same port and data, with nothing
committed lost; while it is down, the store's errors, blobs included, are `Unavailable`
(what an attempt waits out instead of failing its execution)."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from opennua.store import Store, Unavailable, Watcher, open_store
from tests._support.polling import wait_for
from tests.e2e._pgcluster import pg_bin, pg_cluster
from tests.e2e._proc import Server, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_killed_postmaster_restarts_with_its_data_and_is_unavailable_meanwhile() -> None:
    if pg_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but the PostgreSQL server binaries are not installed")
        pytest.skip("initdb/pg_ctl are not installed")
    with pg_cluster() as cluster:
        url = cluster.create_db("nua_restart")
        async with await open_store(url) as store:
            await store.create_session("ses_a", created_at=1.0)
            ref = await store.blobs.put(b"kept across a crash")
            cluster.kill9()
            assert not cluster.ready()
            with pytest.raises(Unavailable):
                await store.blobs.read(ref.sha256)
            with pytest.raises(Unavailable):
                await store.get_session("ses_a")
            cluster.start()
            # The pool replaces its dead connections; what was committed is there.
            for _ in range(5):
                try:
                    assert await store.blobs.read(ref.sha256) == b"kept across a crash"
                    break
                except Unavailable:
                    continue
            assert (await store.get_session("ses_a")).session_id == "ses_a"
            # Wake-ups resume: the store replaced its LISTEN connection on its own.
            async with store.watch() as watcher:
                seq = await _append_until_woken(store, watcher)
            assert seq >= 1
        gc.collect()  # a connection the store left open would warn here, failing the test


async def _append_until_woken(store: Store, watcher: Watcher) -> int:
    # The listener reconnects on its own timer; appends made before it is back wake no one.
    for n in range(100):
        await store.append("ses_a", [_action(n)])
        try:
            _, seq = await asyncio.wait_for(anext(watcher), 0.2)
            return int(seq)
        except TimeoutError:
            continue
    raise AssertionError("no wake-up within 100 appends after the restart")


def _action(n: int) -> dict[str, object]:
    return {
        "v": 1,
        "session_id": "ses_a",
        "seq": None,
        "id": f"act_restart_{n:04d}",
        "type": "message.delta",
        "ts": "2026-12-06T08:00:00.000Z",
        "turn_id": None,
        "run_id": None,
        "client_id": None,
        "intent_id": None,
        "data": {"text": "x"},
    }


def test_a_server_started_while_the_database_is_down_waits_for_it(tmp_path: Path) -> None:
    """`nua serve` rides out a database restart at startup (what a service manager starting
    it before PostgreSQL, or a crash during an outage, needs) and exits 69 only when the
    database stays silent for `--db-wait` seconds."""
    if pg_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but the PostgreSQL server binaries are not installed")
        pytest.skip("initdb/pg_ctl are not installed")
    with pg_cluster() as cluster:
        url = cluster.create_db("nua_wait")
        cluster.kill9()
        data = tmp_path / "data"

        def start_once_waited_for() -> None:
            # Past the connection pool's own 10 s of retries: the server's wait is what is
            # tested. Not at a fixed time: on a loaded machine the server's start alone
            # took long enough that the pool's retries met the database (CI flake).
            wait_for(
                lambda: any(
                    b"waiting for the database" in p.read_bytes() for p in data.glob("*.log")
                ),
                timeout=120,
            )
            cluster.start()

        starter = threading.Thread(target=start_once_waited_for)
        starter.start()
        data.mkdir()
        server = Server(data, db=url, role="host").start()
        try:
            starter.join()
            with server.client() as client:
                assert client.post("/v1/sessions", json={}).status_code == 201
            assert "waiting for the database" in server.log.read_text()
        finally:
            server.stop()
        cluster.kill9()
        port = str(free_port())
        args = [sys.executable, "-m", "opennua.cli", "serve", "--data", str(tmp_path / "d2"),
                "--port", port, "--role", "host", "--db", url, "--db-wait", "2"]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 69, done
        # One line of ours, the last (psycopg's pool adds its own warnings per attempt).
        ours = [line for line in done.stderr.splitlines() if line.startswith("nua serve:")]
        assert ours == [done.stderr.strip().splitlines()[-1]], done.stderr
        assert "cannot open" in ours[0] and "nua_wait" in ours[0], ours
