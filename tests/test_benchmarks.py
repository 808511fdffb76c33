"""Short variants of the benchmarks whose full runs are soaks (the long runs are the
scripts with their goal counts): each script runs end to end and its checks hold on a few
cycles, so it cannot rot unnoticed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Seconds a short variant may take: generous, for a loaded machine; the test's own
#: timeout is longer, so a run that overstays is reported with its output.
LIMIT = 300


def _bench(*args: str) -> str:
    """Run a benchmark script in its own process group; stdout on success. On a timeout
    the whole group is killed: the servers it started must not outlive it."""
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{args[0]} did not finish in {LIMIT} s:\n{out}") from None
    assert proc.returncode == 0, out
    return out


@pytest.mark.timeout(LIMIT + 30)
def test_the_soak_runs_and_every_count_holds_on_a_few_cycles() -> None:
    out = _bench(
        "benchmarks/soak.py", "--kills", "2", "--races", "10", "--accepts", "30",
        "--backends", "sqlite",
    )  # fmt: skip
    assert "sqlite: races with exactly one winner: 10" in out, out
    assert "sqlite: duplicates: 0" in out and "sqlite: mismatches refused (422): 10" in out, out
    assert "0 lost, seqs gapless" in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_scale_benchmark_runs_a_level_and_parks_sessions() -> None:
    out = _bench(
        "benchmarks/scale.py", "--seconds", "2", "--warmup", "1", "--levels", "1,10",
        "--backends", "sqlite", "--parked", "3", "--no-langgraph",
    )  # fmt: skip
    for n in (1, 10):  # a level that counted nothing prints 0.0 steps/s
        assert re.search(rf"opennua nua serve +{n} sessions +[1-9][0-9.]* steps/s", out), out
    assert "parked on approval: 3 of 3 sessions" in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_gateway_benchmark_runs_on_a_few_calls() -> None:
    out = _bench("benchmarks/gateway.py", "--calls", "20", "--warmup", "5", "--repeat", "1")
    assert "direct " in out and "gateway " in out and "added " in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_revocation_benchmark_runs_a_few_rounds() -> None:
    out = _bench("benchmarks/revocation.py", "--rounds", "3", "--backends", "sqlite")
    assert re.search(r"SSE ended +p50 +[0-9.]+ ms .* p99 +[0-9.]+ ms", out), out
    assert re.search(r"WebSocket closed +p50 +[0-9.]+ ms .* p99 +[0-9.]+ ms", out), out


@pytest.mark.timeout(LIMIT + 30)
def test_the_egress_benchmark_runs_on_a_few_connections() -> None:
    out = _bench("benchmarks/egress.py", "--connections", "10", "--mib", "1", "--repeat", "1")
    assert "direct " in out and "proxy GET " in out and "proxy CONNECT " in out, out
    assert re.search(r"download 1 MiB: direct [0-9]+ MiB/s, proxy [0-9]+ MiB/s", out), out


@pytest.mark.e2e
@pytest.mark.timeout(LIMIT + 30)
def test_the_startup_benchmark_runs_a_first_start_and_a_kill_9() -> None:
    out = _bench("benchmarks/startup.py", "--runs", "1", "--sessions", "2")
    assert "first start" in out and "after kill -9" in out and "CPU used by then" in out


@pytest.mark.timeout(LIMIT + 30)
def test_the_plugin_corpus_benchmark_reads_and_publishes_each_plugin_it_finds() -> None:
    # The repository's own fixtures (the corpus itself is outside the repository): a
    # marketplace with a broken plugin and remote entries, plugins beside it, a bare skill.
    out = _bench("benchmarks/plugin_corpus.py", "tests/plugins/fixtures")
    assert re.search(r"marketplace/plugins/broken +validate fail +publish - +errors +2", out), out
    assert ".mcp.json:1: error: server 'ws': type 'websocket' is not one of" in out
    assert re.search(r"as_published +validate ok +publish ok +errors +0 +warnings +7", out), out
    assert re.search(r"claude_layout +validate ok +publish ok +errors +0 +warnings +0", out), out
    assert "remote marketplace entries, not fetched: remote, subdir" in out
    # A bare Agent Skill, wrapped as a user would: named after its folder, no manifest.
    assert re.search(r"skills_collection/greeting \(bare skill\) +validate ok +publish ok", out)
    assert "plugins: 6; validate ok: 5 of 6; publish ok: 5 of 6;" in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_subscription_benchmark_delivers_every_event_once() -> None:
    out = _bench("benchmarks/subscriptions.py", "--sessions", "5", "--actions", "4")
    assert "20 of 20 events arrived, verified: True, duplicates: 0" in out, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_protocol_benchmark_streams_a_turn_through_each_protocol() -> None:
    out = _bench("benchmarks/protocols.py", "--turns", "1")
    rows = dict(
        (m.group(1), (float(m.group(2)), float(m.group(3))))
        for m in re.finditer(r"^(\w+) +([\d.]+) ms +([\d.]+)$", out, re.MULTILINE)
    )
    assert set(rows) == {"sse", "agui", "a2a", "acp"}, out
    assert all(first > 0 and rate > 0 for first, rate in rows.values()), out


@pytest.mark.timeout(LIMIT + 30)
@pytest.mark.parametrize("transport", ["ws", "sse"])
def test_the_fanout_benchmark_delivers_every_action_to_every_subscriber(transport: str) -> None:
    """SSE subscribers ask for gzip: every action must be counted out of the compressed
    stream, as the WebSocket's are out of its frames."""
    out = _bench(
        "benchmarks/fanout.py", "--subscribers", "4", "--rate", "200", "--seconds", "1",
        "--warmup", "0", "--transport", transport,
    )  # fmt: skip
    assert "deliveries 800 of 800 expected; resyncs 0" in out, out
    assert re.search(r"server CPU over the appends [0-9.]+ s", out), out


@pytest.mark.timeout(LIMIT + 30)
def test_the_server_peers_benchmark_counts_steps_on_both_servers() -> None:
    """Both `nua serve` and `langgraph dev` (from .venv-langgraph, which .ci/run builds)
    stream counted steps and turns: the figures are the full run's, not asserted here."""
    lg = ROOT / ".venv-langgraph" / "bin" / "langgraph"
    if not lg.exists() and not os.environ.get("NUA_LANGGRAPH_BIN"):
        if os.environ.get("CI"):
            pytest.fail("CI is set but .venv-langgraph is missing (.ci/run builds it)")
        pytest.skip("no LangGraph server venv: see benchmarks/peers_server.py")
    out = _bench("benchmarks/peers_server.py", "--seconds", "4", "--warmup", "1", "--levels", "2")
    for name in ("opennua", "langgraph"):
        row = re.search(
            rf"{name} +N=2 +[1-9][0-9.]* steps/s .*\(([0-9]+) steps, ([0-9]+) turns\)", out
        )
        assert row, out
        assert int(row[1]) >= 1 and re.search(r"[1-9][0-9.]* events/step", row[0]), out


@pytest.mark.timeout(LIMIT + 30)
def test_the_durable_steps_benchmark_runs_each_variant_on_both_stores() -> None:
    """One execution with each kind of tool, then side-effecting steps of several executions
    at once (their commits grouped): every row counts steps; PostgreSQL's only where a server
    answers (it must in CI)."""
    out = _bench("benchmarks/peers.py", "--steps", "100", "--no-peers", "--executions", "4")
    sqlite, _, postgres = out.partition("PostgreSQL,")
    kinds = ("idempotent tool)", "side-effecting tool)", "side-effecting tool, 4 at once)")
    for part in (
        (sqlite, postgres) if os.environ.get("CI") or "failed" not in postgres else (sqlite,)
    ):
        for kind in kinds:
            row = re.search(rf"opennua \({re.escape(kind)} +([0-9]+) steps/s", part)
            assert row and int(row[1]) > 0, out


@pytest.mark.timeout(LIMIT + 30)
def test_the_checkpoint_benchmark_resumes_both_flows() -> None:
    """Each flow runs, a resume rebuilds its state (the script checks the step count), and
    the row says what was written and read."""
    out = _bench("benchmarks/checkpoint.py", "--steps", "60")
    for flow in ("results", "plans"):
        row = re.search(
            rf"{flow} +60 steps: written +([0-9]+) B/step .* reads +([0-9.]+) MB"
            r" and decodes it in +([0-9.]+) ms",
            out,
        )
        assert row and int(row[1]) > 0 and float(row[2]) > 0, out
