"""Chaos on real processes (issue 20): sessions completed per minute and failover times
while supervisors, hosts and the postmaster are killed and paused on a seeded schedule.

    python benchmarks/chaos.py [--sessions 100] [--seconds 300] [--seed 20] [--settle 300]
    python benchmarks/chaos.py --ci   # as tests/e2e/test_chaos.py: 10 sessions, 60 s

Starts its own PostgreSQL cluster (initdb + pg_ctl on a free port in a temp directory, as
the `postgres` user when run as root), 2 `nua serve --role host` behind nginx with
docs/deploy/nginx.conf, 3 `--role supervisor`; `--sessions` clients run the demo task
back to back, two bots race to answer each approval. Faults, one at a time every 3–8 s:
kill -9 / SIGSTOP (1.5–3 lease TTLs) of a supervisor, kill -9 / SIGSTOP of a host, kill -9
of the postmaster and a start. Then every process is resumed, the sessions finish, and the
invariants are checked (tests/e2e/_chaos.py). Prints the figures; exits 1 on a violation.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import pct
from tests.e2e._chaos import Config, run_chaos
from tests.e2e._pgcluster import pg_cluster


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--settle", type=float, default=300)
    parser.add_argument("--ci", action="store_true", help="the test's variant: 10 sessions, 60 s")
    parser.add_argument("--keep", action="store_true", help="keep the logs directory")
    args = parser.parse_args()
    if args.ci:
        config = Config(sessions=10, seconds=60, seed=args.seed, settle=300, fault_gap=(2.0, 4.0))
    else:
        config = Config(
            sessions=args.sessions, seconds=args.seconds, seed=args.seed, settle=args.settle
        )
    work = Path(tempfile.mkdtemp(prefix="nua-chaos-"))
    with pg_cluster() as cluster:
        report = run_chaos(cluster, work, config)

    minutes = config.seconds / 60
    print(
        f"chaos: {config.sessions} concurrent sessions, {config.seconds:.0f} s, seed {config.seed}"
    )
    print(f"  sessions started          {len(report.runs)}")
    print(
        f"  completed                 {report.completed} ({report.completed_in_window} within the"
        f" fault window: {report.completed_in_window / minutes:.1f}/min)"
    )
    print(f"  resumable at the end      {report.resumable}")
    print(f"  stop reasons              {dict(report.stop_reasons)}")
    print(f"  errors of failed turns    {dict(report.errors)}")
    print(f"  answer races              {report.races} (2 bots each)")
    print(f"  approved command runs     {report.shell_runs}")
    print(f"  client retransmissions    {report.retransmissions}")
    print(f"  keys stuck in flight      {report.stuck_in_flight} (sent again under a new key)")
    fails = [f * 1000 for f in report.failovers]
    if fails:
        print(
            f"  failover (supervisor fault -> next attempt) p50 {pct(fails, 50):.0f} ms"
            f"  p99 {pct(fails, 99):.0f} ms  max {max(fails):.0f} ms  (n={len(fails)},"
            f" lease TTL {config.lease_ttl:.0f} s)"
        )
    else:
        print("  failover                  no execution was running on a faulted supervisor")
    print(
        "  faults injected           "
        + ", ".join(f"{k} {v}" for k, v in sorted(report.fault_counts().items()))
    )
    print(f"  unexpected process exits  {dict(report.unexpected_exits) or 0}")
    print(f"  invariant violations      {len(report.problems)}")
    for problem in report.problems[:40]:
        print("    " + problem)
    print(
        "  phases (s)                " + ", ".join(f"{k} {v:.0f}" for k, v in report.phases.items())
    )
    if args.keep:
        print(f"  logs: {work / 'logs'}, session logs of violations: {work / 'evidence'}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
