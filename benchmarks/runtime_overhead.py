"""Runtime overhead: a 200-step scripted tool loop, ours vs plain `pydantic_ai.Agent.run`.

Same scripted model (one tool call per response, then a final answer) and the same tool.
Ours runs on the in-memory journal and on the SQLite durable journal (one fenced store
transaction per step). Goals: in-memory ≤ 1.3×, durable ≤ 2.0× the plain agent's wall time.
The SQLite run again with OpenTelemetry: GenAI metrics only (what `nua serve` pays with
tracing off), and traced (spans through a batch processor, encoded to OTLP protobuf, then
dropped: no network in the figure). Goal: traced ≤ 1.1× the untraced SQLite run.
Also prints the checkpoint bytes per step (written, and stored after pruning) of the
in-memory run: they depend on the checkpoint format only, not on the machine.

    python benchmarks/runtime_overhead.py [--steps 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._durable import claimed_journal
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from pydantic_ai import Agent, UsageLimits

from opennua.runtime import (
    AgentLoop,
    DerivedIds,
    Limits,
    RunEnv,
    TraceScope,
    Tracing,
    default_agent,
    tool,
)
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call


def script(steps: int) -> ScriptedModel:
    def step(messages: list[Any]) -> ScriptStep:
        n = sum(1 for m in messages if m.kind == "response")
        if n >= steps:
            return ScriptStep(text="done")
        return ScriptStep(calls=(call("lookup", i=n),))

    return ScriptedModel(step)


def lookup(i: int) -> str:
    """Return item i."""
    return f"item {i}"


class EncodingExporter(SpanExporter):
    """Encodes each batch as an OTLP/HTTP exporter would, then drops it."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Any) -> SpanExportResult:
        batch: list[ReadableSpan] = list(spans)
        encode_spans(batch).SerializeToString()
        self.spans += len(batch)
        return SpanExportResult.SUCCESS


def telemetry(traced: bool) -> tuple[Tracing, TracerProvider | None, EncodingExporter]:
    exporter = EncodingExporter()
    provider = None
    if traced:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return Tracing(tracer_provider=provider, meter_provider=meters), provider, exporter


async def ours(steps: int, journal: Any, workdir: Path, tracing: Tracing | None = None) -> float:
    agent = dataclasses.replace(
        default_agent("scripted:bench"), tools=(tool("lookup", idempotent=True)(lookup),)
    )
    env = RunEnv(
        execution_id="exe_bench",
        root_run_id="run_01JD0000000000000000000000",
        workdir=workdir,
        ids=DerivedIds("bench", ms=1_764_403_200_000),
        trace=None
        if tracing is None
        else TraceScope(
            tracing,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            {"opennua.session_id": "ses_bench", "opennua.turn_id": "trn_bench"},
            journal.seqs_of if hasattr(journal, "seqs_of") else lambda run_id: (),
        ),
    )
    loop = AgentLoop(agent, journal, env, model=script(steps), limits=Limits(max_steps=steps + 5))
    t0 = time.perf_counter()
    outcome = await loop.run("go")
    elapsed = time.perf_counter() - t0
    assert type(outcome).__name__ == "Completed", outcome
    return elapsed


async def plain(steps: int) -> float:
    agent = Agent(script(steps))
    agent.tool_plain(lookup)
    t0 = time.perf_counter()
    result = await agent.run("go", usage_limits=UsageLimits(request_limit=steps + 5))
    elapsed = time.perf_counter() - t0
    assert result.output == "done"
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {
        "plain Agent.run": [],
        "ours, in-memory": [],
        "ours, SQLite": [],
        "  + GenAI metrics": [],
        "  + traced": [],
    }
    spans = 0
    written = stored = 0
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        await plain(5)  # warm imports and caches
        for r in range(args.repeat):
            rows["plain Agent.run"].append(await plain(args.steps))
            memory = InMemoryJournal()
            rows["ours, in-memory"].append(await ours(args.steps, memory, ws))
            written, stored = memory.bytes_written, memory.stored_bytes
            store, journal, _ = await claimed_journal(f"sqlite:///{tmp}/bench{r}.db")
            try:
                rows["ours, SQLite"].append(await ours(args.steps, journal, ws))
            finally:
                await store.close()
            for name, traced in (("  + GenAI metrics", False), ("  + traced", True)):
                url = f"sqlite:///{tmp}/bench{r}-{traced}.db"
                store, journal, _ = await claimed_journal(url, track_seqs=traced)
                tracing, provider, exporter = telemetry(traced)
                try:
                    rows[name].append(await ours(args.steps, journal, ws, tracing))
                finally:
                    await store.close()
                    if provider is not None:
                        provider.shutdown()  # exports the rest, outside the timing
                        spans = exporter.spans
    base = statistics.median(rows["plain Agent.run"])
    print(f"{args.steps}-step scripted tool loop, median of {args.repeat} runs")
    for name, times in rows.items():
        med = statistics.median(times)
        print(
            f"  {name:18s} {med * 1000:8.1f} ms  {args.steps / med:8.0f} steps/s"
            f"  {med / base:5.2f}x"
        )
    print(
        f"checkpoint bytes/step: {written / args.steps:.0f} written,"
        f" {stored / args.steps:.0f} stored"
    )
    traced = statistics.median(rows["  + traced"]) / statistics.median(rows["ours, SQLite"])
    print(f"traced / untraced SQLite: {traced:.2f}x ({spans} spans per run)")
    print("goals: in-memory <= 1.30x, SQLite durable <= 2.00x, traced <= 1.10x untraced")


if __name__ == "__main__":
    asyncio.run(main())
