"""Chaos on real processes, the CI variant of benchmarks/chaos.py (issue 20): its own
PostgreSQL cluster, 2 hosts behind the shipped nginx config, 3 supervisors, ~10 sessions of
the demo task with bots racing to answer, for ~60 s of seeded kill -9 and SIGSTOP of
supervisors and hosts and kill -9 of the postmaster. The invariants are checked from the
log and the side-effect file (tests/e2e/_chaos.py); no timing is asserted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e._chaos import Config, run_chaos
from tests.e2e._pgcluster import pg_bin, pg_cluster
from tests.e2e._proc import nginx_binary

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(900)]


def test_sessions_survive_a_minute_of_seeded_faults(tmp_path: Path) -> None:
    nginx_binary()  # skips (fails in CI) without nginx
    if pg_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but the PostgreSQL server binaries are not installed")
        pytest.skip("initdb/pg_ctl are not installed")
    seed = int(os.environ.get("NUA_CHAOS_SEED", "20"))
    config = Config(sessions=10, seconds=60, seed=seed, settle=300, fault_gap=(2.0, 4.0))
    with pg_cluster() as cluster:
        report = run_chaos(cluster, tmp_path, config)

    faults = report.fault_counts()
    summary = (
        f"seed {seed}: faults {dict(faults)}, exits {dict(report.unexpected_exits)},"
        f" phases {report.phases}, completed {report.completed} of {len(report.runs)}"
    )
    assert not report.problems, summary + "\n" + "\n".join(report.problems[:30])
    # Every session completed or is resumable, and the run did real work under faults.
    assert report.completed + report.resumable == len(report.runs), summary
    assert report.completed >= 1, summary
    assert report.races >= 1 and report.shell_runs >= 1, summary
    # The schedule drew each kind of fault at least once in a minute of this seed.
    assert set(faults) == {
        "supervisor_kill9",
        "supervisor_sigstop",
        "host_kill9",
        "host_sigstop",
        "postgres_kill9",
    }, summary
    # Nothing exited on its own (a database restart is an outage to ride out, not a crash).
    assert not report.unexpected_exits, summary + "\n" + "\n".join(report.exit_logs)
