"""The private PostgreSQL cluster of the chaos tests (tests/e2e/_pgcluster.py): the
postmaster is SIGKILLed and started again on the same port and data, with nothing
committed lost; while it is down, the store's errors, blobs included, are `Unavailable`
(what an attempt waits out instead of failing its execution)."""

from __future__ import annotations

import os

import pytest

from opennua.store import Unavailable, open_store
from tests.e2e._pgcluster import pg_bin, pg_cluster

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
