"""Read-only commands: sessions, show, history, usage, trace, artifacts, artifact get.

Everything here is a projection of the Host's state or log; `--json` output is stable:
`show --json` prints the canonical state (byte-identical to a replay of the log),
`history --json` one action per line as the Host stored it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.cells import cell_len
from rich.table import Table
from rich.tree import Tree

from opennua.client import Client, NotFoundError
from opennua.client.responses import SessionItem
from opennua.protocol import SessionState, state_to_json
from opennua.protocol.state import USAGE_FIELDS, Turn

from ._context import Settings, execute, fail, settings, write_line
from ._render import render_session, short_digest, usage_rows
from ._safe import SafeText, clean

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Sid = Annotated[str, typer.Argument(metavar="SID", help="A session id.")]


def sessions(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 50,
    json_out: JsonFlag = False,
) -> None:
    """List sessions, newest first."""

    async def body(client: Client, cfg: Settings) -> int:
        items: list[SessionItem] = []
        async for item in client.iter_sessions(min(limit, 200)):
            items.append(item)
            if len(items) >= limit:
                break
        if json_out:
            for item in items:
                write_line(json.dumps(item, sort_keys=True, ensure_ascii=False))
            return 0
        table = _Table("session!", "title", "agent", "created!")
        for item in items:
            digest = item.get("snapshot_digest")
            agent = " ".join(filter(None, [item.get("plugin"), digest and short_digest(digest)]))
            table.add_row(item["session_id"], item.get("title") or "", agent, item["created_at"])
        cfg.stdout.print(table.fit(cfg.stdout.width) if items else "no sessions yet")
        return 0

    execute(ctx, body)


def show(
    ctx: typer.Context,
    session_id: Sid,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the canonical state JSON.")
    ] = False,
    reasoning: Annotated[bool, typer.Option("--reasoning", help="Show reasoning in full.")] = False,
) -> None:
    """Show a session: every turn's timeline, plan, sub-agents, artifacts and usage, and
    who each execution ran as (principal), what caused it (trigger) and what ran it
    (workload)."""

    async def body(client: Client, cfg: Settings) -> int:
        _, state = await client.session(session_id).snapshot()
        if json_out:
            write_line(state_to_json(state))
            return 0
        cfg.stdout.print(render_session(state, reasoning=reasoning))
        for turn in state["turns"]:
            if turn.get("execution_id"):
                execution = await client.execution(turn["execution_id"])
                cfg.stdout.print(SafeText(execution_line(execution)))
        return 0

    execute(ctx, body)


def history(
    ctx: typer.Context,
    session_id: Sid,
    after: Annotated[int, typer.Option(help="Only actions with seq > AFTER.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="One action JSON per line.")] = False,
) -> None:
    """The session's action log, in order."""

    async def body(client: Client, cfg: Settings) -> int:
        table = _Table("seq!", "type!", "turn!", "data")
        async for action in client.session(session_id).history(after):
            if json_out:
                write_line(json.dumps(action, sort_keys=True, ensure_ascii=False))
            else:
                data = json.dumps(action["data"], ensure_ascii=False, sort_keys=True)
                table.add_row(
                    str(action["seq"]),
                    action["type"],
                    action.get("turn_id") or "",
                    data,
                )
        if not json_out:
            cfg.stdout.print(table.fit(cfg.stdout.width))
        return 0

    execute(ctx, body)


class _Table(Table):
    """A plain table; columns named with a trailing "!" (ids, numbers) keep their full
    width, and only the others are cut (with an ellipsis) when the screen is narrow."""

    def __init__(self, *columns: str) -> None:
        super().__init__(box=None)
        self._fixed: list[int] = []
        for index, column in enumerate(columns):
            if column.endswith("!"):
                self._fixed.append(index)
                self.add_column(column[:-1], no_wrap=True, min_width=len(column) - 1)
            else:
                self.add_column(column, no_wrap=True, overflow="ellipsis")

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        # Cleaned here as well as when printed, so widths are those of what is shown.
        cells = tuple(clean(cell) if isinstance(cell, str) else cell for cell in cells)
        for index in self._fixed:
            column = self.columns[index]
            column.min_width = max(column.min_width or 0, cell_len(str(cells[index])))
        super().add_row(*cells, **kwargs)

    def fit(self, width: int) -> _Table:
        # Rich collapses an overflowing table by dropping its first columns, so the
        # cuttable columns are sized to what the fixed ones leave over, beforehand.
        flexible = [c for i, c in enumerate(self.columns) if i not in self._fixed]
        used = sum(self.columns[i].min_width or 0 for i in self._fixed) + 2 * len(self.columns)
        for column in flexible:
            column.max_width = max(8, min(80, (width - used) // max(len(flexible), 1)))
        return self


def usage_report(state: SessionState) -> dict[str, Any]:
    return {
        "session_id": state["session_id"],
        "usage": state["usage"],
        "usage_by_model": state["usage_by_model"],
        "turns": [
            {
                "turn_id": turn["turn_id"],
                "usage": turn["usage"],
                "usage_by_model": turn["usage_by_model"],
                "sub_agents": [
                    {"run_id": w["worker_run_id"], "name": w["name"], "usage": w["usage"]}
                    for w in turn["workers"].values()
                ],
            }
            for turn in state["turns"]
        ],
    }


def usage(
    ctx: typer.Context,
    session_id: Annotated[
        str | None, typer.Argument(metavar="[SID]", help="A session (else: all of a workspace).")
    ] = None,
    by: Annotated[
        str, typer.Option("--by", help="Without SID: principal, workspace, model or deployment.")
    ] = "principal",
    since: Annotated[
        str | None,
        typer.Option("--since", help="Without SID: 30m, 12h, 7d, an ISO date or unix seconds."),
    ] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", help="Without SID: default your first.")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Token usage of a session per turn and model (sub-agents included in their turn);
    without SID, a workspace's usage per execution principal, workspace, model or
    deployment."""
    if session_id is None:
        _aggregate_usage(ctx, by, since, workspace, json_out)
        return

    async def body(client: Client, cfg: Settings) -> int:
        _, state = await client.session(session_id).snapshot()
        if json_out:
            write_line(json.dumps(usage_report(state), sort_keys=True))
            return 0
        # USAGE_FIELDS order: input, output, cache read, cache creation, reasoning.
        table = _Table("", "input!", "output!", "cache read!", "cache write!", "reasoning!")
        shown = None
        for turn_id, label, amounts in usage_rows(state):
            if turn_id and turn_id != shown:
                table.add_row(SafeText(f"turn {turn_id}", style="bold"), *[""] * 5)
            shown = turn_id
            row = [f"{amounts[f]:,}" for f in USAGE_FIELDS]  # type: ignore[literal-required]
            style = "bold" if label.endswith("total") else None
            table.add_row(label if not turn_id else f"  {label}", *row, style=style)
        cfg.stdout.print(table.fit(cfg.stdout.width))
        return 0

    execute(ctx, body)


def execution_line(e: Mapping[str, Any]) -> str:
    """`turn … execution … as PRINCIPAL · trigger KIND by … · workload …`."""
    trigger = e.get("trigger") or {}
    w = e.get("workload") or {}
    ran = f"{w.get('supervisor_id')} attempt {w.get('attempt')}" if w.get("attempt") else "none"
    return (
        f"turn {e['turn_id']} execution {e['execution_id']} ({e['status']}) · "
        f"principal {e.get('principal_id')} · trigger {trigger.get('kind')} by "
        f"{trigger.get('principal_id')} · workload snapshot {w.get('snapshot_digest')} "
        f"deployment {w.get('deployment_digest')} ran on {ran}"
    )


def parse_since(text: str, now: float) -> float:
    """`30m`, `12h`, `7d` (ago), an ISO 8601 date/time (UTC if no zone) or unix seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if text[:-1].isdigit() and text[-1:] in units:
        return now - int(text[:-1]) * units[text[-1]]
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _aggregate_usage(
    ctx: typer.Context, by: str, since: str | None, workspace: str | None, json_out: bool
) -> None:
    config = settings(ctx)
    if by not in ("principal", "workspace", "model", "deployment"):
        raise fail(config, "--by must be principal, workspace, model or deployment")
    since_at: float | None = None
    if since is not None:
        try:
            since_at = parse_since(since, time.time())
        except ValueError:
            raise fail(
                config, f"--since {since!r}: give 30m, 12h, 7d, an ISO date or seconds"
            ) from None

    async def body(client: Client, cfg: Settings) -> int:
        report = await client.usage(by, since=since_at, workspace_id=workspace)
        if json_out:
            write_line(json.dumps(report, sort_keys=True))
            return 0
        table = _Table(
            by, "input!", "output!", "cache read!", "cache write!", "reasoning!", "cost USD!"
        )
        for item in report["items"]:
            counts: Mapping[str, Any] = item
            row = [f"{counts[f]:,}" for f in USAGE_FIELDS]
            cost = f"{Decimal(item['cost_usd']):.4f}"
            if item["unpriced_responses"]:
                cost += f" (+{item['unpriced_responses']} unpriced)"
            table.add_row(item["key"] or "(none)", *row, cost)
        cfg.stdout.print(table.fit(cfg.stdout.width))
        return 0

    execute(ctx, body)


def _root_run(turn: Turn) -> str | None:
    workers = turn["workers"]
    for item in turn["timeline"]:
        entry: Any = None
        if item["kind"] == "message":
            entry = turn["messages"].get(item["id"])
        elif item["kind"] == "reasoning":
            entry = turn["reasoning"].get(item["id"])
        elif item["kind"] == "tool_call":
            entry = turn["tool_calls"].get(item["id"])
        run_id = entry["run_id"] if entry else None
        if run_id and run_id not in workers:
            return str(run_id)
    parents = {w["parent_run_id"] for w in workers.values()} - set(workers)
    return next(iter(parents), None)


async def trace_report(client: Client, state: SessionState) -> dict[str, Any]:
    """session → turn (trace id) → execution → attempts → runs with parent links."""
    turns = []
    for turn in state["turns"]:
        try:
            execution: Mapping[str, Any] = await client.execution(turn["execution_id"])
        except NotFoundError:
            execution = {"execution_id": turn["execution_id"], "attempts": []}
        resumed: dict[str, Any] = {a["attempt_id"]: a for a in turn["attempts"]}
        attempts = []
        for record in execution.get("attempts", []):
            seen: dict[str, Any] = resumed.get(record["attempt_id"]) or {}
            attempts.append(
                {
                    **record,
                    "resumed_from_checkpoint": seen.get("resumed_from_checkpoint"),
                    "started_at": seen.get("started_at"),
                }
            )
        root = _root_run(turn)
        runs: list[dict[str, Any]] = []
        if root is not None:
            runs.append(
                {"run_id": root, "parent_run_id": None, "parent_tool_call_id": None, "name": "root"}
            )
        for worker in turn["workers"].values():
            runs.append(
                {
                    "run_id": worker["worker_run_id"],
                    "parent_run_id": worker["parent_run_id"],
                    "parent_tool_call_id": worker["parent_tool_call_id"],
                    "name": worker["name"],
                    "status": worker["status"],
                }
            )
        turns.append(
            {
                "turn_id": turn["turn_id"],
                "trace_id": turn["trace_id"],
                "state": turn["state"],
                "stop_reason": turn["stop_reason"],
                "retry_of": turn["retry_of"],
                "execution": {
                    key: execution.get(key)
                    for key in ("execution_id", "status", "attempt", "epoch", "retry_of")
                }
                | {"deadline_at": execution.get("deadline_at"), "attempts": attempts},
                "runs": runs,
            }
        )
    return {"session_id": state["session_id"], "title": state["title"], "turns": turns}


def trace(ctx: typer.Context, session_id: Sid, json_out: JsonFlag = False) -> None:
    """The causal chain: session → turn → execution → attempts → runs (with parents)."""

    async def body(client: Client, cfg: Settings) -> int:
        _, state = await client.session(session_id).snapshot()
        report = await trace_report(client, state)
        if json_out:
            write_line(json.dumps(report, sort_keys=True))
            return 0
        tree = Tree(_label("session", report["session_id"], report["title"]))
        for turn in report["turns"]:
            retry = f"retry of {turn['retry_of']}" if turn["retry_of"] else ""
            node = tree.add(
                _label(
                    "turn", turn["turn_id"], f"({turn['state']})", "trace", turn["trace_id"], retry
                )
            )
            ex = turn["execution"]
            ex_node = node.add(
                _label("execution", ex["execution_id"], f"({ex['status']})", f"epoch {ex['epoch']}")
            )
            for attempt in ex["attempts"]:
                resumed = "resumed from checkpoint" if attempt["resumed_from_checkpoint"] else ""
                ex_node.add(
                    _label(
                        f"attempt {attempt['attempt']}",
                        attempt["attempt_id"],
                        f"epoch {attempt['epoch']} on {attempt['supervisor_id']}",
                        resumed,
                    )
                )
            by_parent: dict[str | None, list[dict[str, Any]]] = {}
            for run in turn["runs"]:
                by_parent.setdefault(run["parent_run_id"], []).append(run)
            _add_runs(node, by_parent, None)
        cfg.stdout.print(tree)
        return 0

    execute(ctx, body)


def _label(kind: str, *parts: str) -> SafeText:
    label = SafeText(kind, style="bold")
    for part in parts:
        if part:
            label.append(" " + part)
    return label


def _add_runs(node: Tree, by_parent: dict[str | None, list[dict[str, Any]]], parent: Any) -> None:
    for run in by_parent.get(parent, []):
        via = f"via tool call {run['parent_tool_call_id']}" if run["parent_tool_call_id"] else ""
        parent_link = f"parent {run['parent_run_id']}" if run["parent_run_id"] else ""
        child = node.add(_label("run", run["run_id"], run["name"], parent_link, via))
        _add_runs(child, by_parent, run["run_id"])


def diff(
    ctx: typer.Context,
    session_id: Sid,
    change_id: Annotated[str, typer.Argument(metavar="CHANGE", help="A file change's id.")],
) -> None:
    """Print the whole unified diff of a file change (the timeline shows its first lines)."""

    async def body(client: Client, cfg: Settings) -> int:
        text = await client.session(session_id).file_diff(change_id)
        # A model wrote those bytes: on a terminal nothing of them may drive it.
        sys.stdout.write(clean(text) if sys.stdout.isatty() else text)
        sys.stdout.flush()
        return 0

    execute(ctx, body)


def artifacts(ctx: typer.Context, session_id: Sid, json_out: JsonFlag = False) -> None:
    """Artifacts published in a session."""

    async def body(client: Client, cfg: Settings) -> int:
        _, state = await client.session(session_id).snapshot()
        items = sorted(state["artifacts"].values(), key=lambda a: a["artifact_id"])
        if json_out:
            for item in items:
                write_line(json.dumps(item, sort_keys=True))
            return 0
        table = _Table("artifact!", "name", "size!", "sha256!", "state!")
        for a in items:
            table.add_row(
                a["artifact_id"], a["name"], f"{a['size']:,}", a["sha256"][:16], a["state"]
            )
        cfg.stdout.print(table.fit(cfg.stdout.width) if items else "no artifacts")
        return 0

    execute(ctx, body)


artifact_app = typer.Typer(help="One artifact.", no_args_is_help=True)


@artifact_app.command("retry")
def artifact_retry(
    ctx: typer.Context,
    session_id: Sid,
    artifact_id: Annotated[str, typer.Argument(metavar="AID")],
) -> None:
    """Upload again an artifact whose upload failed (exit 1 while it still fails)."""

    async def body(client: Client, cfg: Settings) -> int:
        result = await client.session(session_id).retry_artifact(artifact_id)
        error = result.get("error")
        why = f": {error['message']}" if error else ""
        cfg.stdout.print(f"{artifact_id} {result['state']}{why}", soft_wrap=True)
        return 0 if result["state"] == "published" else 1

    execute(ctx, body)


@artifact_app.command("link")
def artifact_link(
    ctx: typer.Context, artifact_id: Annotated[str, typer.Argument(metavar="AID")]
) -> None:
    """Print a single-use download link for a browser (short-lived, opened without a token)."""

    async def body(client: Client, cfg: Settings) -> int:
        url, expires_at = await client.download_link(artifact_id)
        write_line(url)
        cfg.stderr.print(f"opens once, until {expires_at}")
        return 0

    execute(ctx, body)


@artifact_app.command("get")
def artifact_get(
    ctx: typer.Context,
    artifact_id: Annotated[str, typer.Argument(metavar="AID")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Where to write it (default: its name; - for stdout)."),
    ] = None,
) -> None:
    """Download an artifact; the sha256 is verified before the file is written."""

    async def body(client: Client, cfg: Settings) -> int:
        if out is not None and str(out) == "-":
            _, data = await client.read_artifact(artifact_id)
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return 0
        if out is None:
            name = Path((await client.artifact(artifact_id))["name"]).name or artifact_id
            dest = Path(name)
        else:
            dest = (
                out / Path((await client.artifact(artifact_id))["name"]).name
                if out.is_dir()
                else out
            )
        meta = await client.save_artifact(artifact_id, dest)
        cfg.stdout.print(
            f"saved {meta['name']} → {dest} ({meta['size']:,} bytes, sha256 {meta['sha256']} ok)",
            soft_wrap=True,
        )
        return 0

    execute(ctx, body)
