"""Soak figures (issue 20): kill -9 cycles of appenders, answer races, idempotent accepts.

    python benchmarks/soak.py [--kills 1000] [--races 10000] [--accepts 100000]
                              [--backends sqlite,postgres] [--pg postgresql://postgres@127.0.0.1:5432/postgres]

Per backend (SQLite in a temp directory; PostgreSQL in a fresh database `nua_soak_<random>`,
dropped at the end):

- kill cycles: a child process (tests/store/crash_child.py) appends and prints each
  acknowledged seq; it is SIGKILLed at a random moment, `--kills` times. Then: every
  acknowledged append is in the log with its id, and seqs are gapless.
- answer races: `--races` input requests, each answered by 5 clients at once through two
  Hosts on two store connections. Exactly one answer wins; every loser is told the winner.
- idempotent accepts: `--accepts` deliveries of create-session intents, each key sent twice
  with the same body (must replay: 0 duplicates) and once with another body (must be
  refused `idempotency_key_reused`, the HTTP edge's 422, every time).

Prints the counts only; exits 1 if any count is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.server._harness import Env, FakeClock, park_for_input
from tests.store.test_crash import _run_and_kill

from opennua.host import Hub, SessionHost
from opennua.protocol import AnswerInput, CreateSession, SendMessage
from opennua.protocol.actions import TextPart
from opennua.store import open_store

OPTIONS = [{"option_id": "ok", "name": "OK", "kind": "allow_once"}]


def kill_cycles(url: str, tmp: Path, n: int) -> tuple[int, int, int]:
    """(cycles, acknowledged appends, lost or misplaced ones); raises on a seq gap."""
    rng = random.Random(20)
    out = tmp / "acknowledged.txt"
    out.touch()
    for cycle in range(n):
        _run_and_kill(url, out, rng, cycle)
    acknowledged: dict[int, str] = {}
    for line in out.read_text().splitlines():
        if not line.endswith(" torn"):
            seq, action_id = line.split(" ")
            acknowledged[int(seq)] = action_id

    async def stored() -> dict[int, str]:
        async with await open_store(url, data_dir=tmp) as store:
            log = await store.read("ses_crash", limit=10_000_000)
        assert [a["seq"] for a in log] == list(range(1, len(log) + 1)), "seq gap"
        return {a["seq"]: a["id"] for a in log}

    log = asyncio.run(stored())
    lost = sum(1 for s, i in acknowledged.items() if log.get(s) != i)
    return n, len(acknowledged), lost


async def races_and_accepts(url: str, tmp: Path, races: int, accepts: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    clock = FakeClock()
    a = await open_store(url, data_dir=tmp)
    b = await open_store(url, data_dir=tmp)
    try:
        hosts = [SessionHost(s, Hub(s), clock=clock) for s in (a, b)]
        for host in hosts:
            await host.registry.ensure_builtin("scripted:demo")
        env = Env(a, Hub(a), hosts[0], clock, None, None)  # type: ignore[arg-type]
        created = await hosts[0].submit(
            None, CreateSession(intent_id="int_soak", client_id="c", title="soak")
        )
        sid = created.ids["session_id"]  # type: ignore[union-attr]
        for r in range(races):
            message = SendMessage(
                intent_id=f"int_m{r}", client_id="c", content=[TextPart(text="go")]
            )
            turn = await hosts[r % 2].submit(sid, message)
            eid, tid = turn.ids["execution_id"], turn.ids["turn_id"]  # type: ignore[union-attr]
            rid = await park_for_input(env, sid, eid, tid, options=OPTIONS)
            answers = [
                AnswerInput(
                    intent_id=f"int_a{r}_{i}", client_id=f"cli_{i}", request_id=rid, option_id="ok"
                )
                for i in range(5)
            ]
            results = await asyncio.gather(
                *(hosts[i % 2].submit(sid, x) for i, x in enumerate(answers))
            )
            winners = [x for x, res in zip(answers, results, strict=True) if res.type == "accepted"]
            counts["races"] += 1
            counts["races with exactly one winner"] += len(winners) == 1
            # Who answered, as the loser was told: the client and principal (the record also
            # carries `on_behalf_of`, empty here).
            told = {
                (by.get("client_id"), by.get("principal_id"))
                for res in results
                if res.type == "conflict"
                for by in [res.resolution.get("answered_by") or {}]  # type: ignore[union-attr]
            }
            if winners:
                counts["losers told another winner"] += told != {
                    (winners[0].client_id, "prn_owner")
                }
            claimed = await a.claim("sup", clock(), 15.0)
            assert claimed is not None
            async with a.fenced(eid, claimed.epoch) as tx:
                tx.finish("completed", now=clock())
        for i in range(accepts // 3):
            intent = CreateSession(intent_id=f"int_s{i}", client_id="c", title="t")
            first = await hosts[i % 2].submit(None, intent)
            again = await hosts[(i + 1) % 2].submit(None, intent)
            other = await hosts[i % 2].submit(
                None, CreateSession(intent_id=f"int_s{i}", client_id="c", title="other")
            )
            counts["accepts"] += 3
            counts["duplicates"] += again != first
            counts["mismatches refused (422)"] += (
                other.type == "rejected" and other.code == "idempotency_key_reused"  # type: ignore[union-attr]
            )
    finally:
        await a.close()
        await b.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--races", type=int, default=10_000)
    parser.add_argument("--accepts", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    bad = False
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            name = f"nua_soak_{secrets.token_hex(4)}"
            if backend == "sqlite":
                urls = [f"sqlite:///{tmp}/kills.db", f"sqlite:///{tmp}/races.db"]
            else:
                with psycopg.connect(args.pg, autocommit=True) as conn:
                    for suffix in ("k", "r"):
                        conn.execute(f'CREATE DATABASE "{name}{suffix}"')
                base = args.pg.rsplit("/", 1)[0]
                urls = [f"{base}/{name}k", f"{base}/{name}r"]
            try:
                began = time.perf_counter()
                cycles, acked, lost = kill_cycles(urls[0], tmp, args.kills)
                print(
                    f"{backend}: {cycles} kill -9 cycles, {acked} acknowledged appends, "
                    f"{lost} lost, seqs gapless ({time.perf_counter() - began:.0f} s)"
                )
                began = time.perf_counter()
                counts = asyncio.run(races_and_accepts(urls[1], tmp, args.races, args.accepts))
                for key, value in counts.items():
                    print(f"{backend}: {key}: {value}")
                print(f"{backend}: races and accepts took {time.perf_counter() - began:.0f} s")
                bad |= lost > 0
                bad |= counts["races with exactly one winner"] != counts["races"]
                bad |= counts["losers told another winner"] > 0 or counts["duplicates"] > 0
                bad |= counts["mismatches refused (422)"] != counts["accepts"] // 3
            finally:
                if backend != "sqlite":
                    with psycopg.connect(args.pg, autocommit=True) as conn:
                        for suffix in ("k", "r"):
                            conn.execute(f'DROP DATABASE IF EXISTS "{name}{suffix}" WITH (FORCE)')
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
