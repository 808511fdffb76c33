"""The live view of `nua run` and `nua attach`.

Finished items are printed once, in timeline order, and stay in the scrollback; what is
still moving (streamed text, running tool calls, a sub-agent at work, the plan and a
spinner naming the current step) lives in a footer redrawn in place. An item is printed
only when it and every item before it are final, so the printed order is the timeline's
order of first appearance whatever the network did.

When an input request opens and prompting is on, the view asks while it keeps reading
the stream: if another client answers first the question is withdrawn and the view says
who answered; if our answer loses the race, the conflict says the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.spinner import Spinner

from opennua.client import (
    ActionEvent,
    ConflictError,
    ConnectionEvent,
    Event,
    GoneError,
    InvalidRequestError,
    SessionClient,
    Subscription,
)
from opennua.protocol.state import InputRequest, SessionState, Turn

from ._context import ExitCode, who_answered
from ._render import (
    current_step,
    input_lines,
    is_final,
    item_lines,
    model_retry_text,
    plan_lines,
    turn_footer,
    turn_header,
)
from ._safe import SafeText, json_line


class LineReader:
    """Lines from stdin without blocking the event loop (a daemon thread does the read).

    One reader serves every prompt, so a question withdrawn mid-read never leaves a
    second thread competing for the next line.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[str | None] | None = None

    async def readline(self) -> str | None:
        """The next line without its newline, or None at end of input."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            stream = self._stream or sys.stdin
            threading.Thread(
                target=self._pump, args=(stream, loop, self._queue), daemon=True
            ).start()
        return await self._queue.get()

    @staticmethod
    def _pump(
        stream: TextIO, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]
    ) -> None:
        while True:
            try:
                line: str | None = stream.readline() or None
            except (OSError, ValueError):  # closed, or not readable at all
                line = None
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\n") if line else None)
            except RuntimeError:  # the loop is gone: the command has finished
                return
            if line is None:
                return


class Follower:
    """Draws the followed turns of one session until they end; returns an exit code.

    `turn_id` follows one turn (`nua run`); None follows the session's current turn and
    any that start after it while this client watches (`nua attach`). `until_seq` keeps
    it going at least until the state reaches that seq (catching up after `--after N`).
    """

    def __init__(
        self,
        session: SessionClient,
        console: Console,
        stderr: Console,
        *,
        turn_id: str | None = None,
        prompt: bool = False,
        json_lines: bool = False,
        reasoning: bool = False,
        follow: bool = False,
        until_seq: int = 0,
        lines: LineReader | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.session = session
        self.console = console
        self.stderr = stderr
        self.turn_id = turn_id
        self.prompt = prompt and not json_lines
        self.json_lines = json_lines
        self.reasoning = reasoning
        self.follow = follow
        # Not done before the state has caught up with the log as it was when we started.
        self.until_seq = until_seq
        self.lines = lines or LineReader()
        self.now = now  # the countdown to a model retry reads this clock
        self.first_turn = 0
        self.cursor: dict[str, int] = {}
        self.closed: set[str] = set()
        self.hinted: set[str] = set()
        self.asked: set[str] = set()
        self.status = ""
        self._activity: dict[str, str] = {}
        self._live: Live | None = None
        self._prompt_task: asyncio.Task[None] | None = None
        self._prompt_request: str | None = None
        self._event: asyncio.Future[Event] | None = None

    @property
    def state(self) -> SessionState:
        return self.session.local.state

    async def run(self, subscription: Subscription) -> int:
        await subscription.start()
        turns = self.state["turns"]
        if self.turn_id is None:
            active = [i for i, t in enumerate(turns) if t["state"] != "ended"]
            self.first_turn = active[0] if active else max(len(turns) - 1, 0)
        events = aiter(subscription)
        try:
            self._show()
            code = self._progress()
            while code is None:
                code = await self._next(events)
            return code
        finally:
            if self._event is not None:
                self._event.cancel()
                with contextlib.suppress(BaseException):
                    await self._event
            await self._cancel_prompt()
            self._hide()

    async def _next(self, events: Any) -> int | None:
        # The next event and the open question race: whichever finishes first is handled,
        # the other stays pending for the next round.
        if self._event is None:
            self._event = asyncio.ensure_future(anext(events))
        waiting: set[asyncio.Future[Any]] = {self._event}
        if self._prompt_task is not None:
            waiting.add(self._prompt_task)
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self._prompt_task is not None and self._prompt_task in done:
            task, self._prompt_task, self._prompt_request = self._prompt_task, None, None
            task.result()
        if self._event in done:
            event: Event = self._event.result()
            self._event = None
            self._on_event(event)
        return self._progress()

    # -- drawing -------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, ActionEvent):
            if self.json_lines:
                # As the Host sent it, keys sorted: the same bytes `nua history --json` prints.
                line = json.dumps(event.raw, sort_keys=True, ensure_ascii=False)
                sys.stdout.write(json_line(line) + "\n")
                sys.stdout.flush()
            self.status = ""
        elif isinstance(event, ConnectionEvent):
            if event.status == "disconnected":
                self.status = f"reconnecting in {event.retry_in:.1f}s ({event.error})"
                if not self.console.is_terminal or self.json_lines:
                    self.stderr.print(SafeText(f"connection lost: {self.status}", style="dim"))
            else:
                self.status = ""
                if not self.console.is_terminal or self.json_lines:
                    self.stderr.print(SafeText("reconnected", style="dim"))
        else:
            self.stderr.print(
                SafeText(f"resynced from a snapshot at seq {event.to_seq}", style="dim")
            )

    def _followed(self) -> list[Turn]:
        turns = self.state["turns"]
        if self.turn_id is not None:
            return [t for t in turns if t["turn_id"] == self.turn_id]
        return turns[self.first_turn :]

    def _progress(self) -> int | None:
        """Print what became final, react to open requests, and say whether we are done."""
        followed = self._followed()
        for turn in followed:
            self._flush(turn)
        self._requests(followed)
        self._refresh()
        if self.state["seq"] < self.until_seq:
            return None
        if not followed:
            if self.turn_id is None and not self.follow:
                self._print(SafeText("no turns yet", style="dim"))
                return ExitCode.OK
            return None
        done = all(t["turn_id"] in self.closed for t in followed) and not self.follow
        # attach waits for turns queued behind the one it watched; run only for its own.
        if done and (self.turn_id is not None or self.state["status"] == "idle"):
            last = followed[-1]
            return ExitCode.OK if last["stop_reason"] == "end_turn" else ExitCode.TASK_FAILED
        return None

    def _flush(self, turn: Turn) -> None:
        tid = turn["turn_id"]
        if tid in self.closed:
            return
        ended = turn["state"] == "ended"
        if tid not in self.cursor:
            self.cursor[tid] = 0
            self._print(turn_header(turn, with_state=False))
        timeline = turn["timeline"]
        while self.cursor[tid] < len(timeline):
            item = timeline[self.cursor[tid]]
            if not (ended or is_final(turn, item)):
                break
            self._print(*item_lines(self.state, turn, item, 1, reasoning=self.reasoning))
            self.cursor[tid] += 1
        if ended:
            self._print(*[SafeText("  ") + line for line in turn_footer(turn)])
            self.closed.add(tid)

    def _footer(self) -> RenderableType:
        parts: list[RenderableType] = []
        for pending in self.session.local.pending_messages():
            parts.append(SafeText(f"  › {pending.text}  ({pending.status}…)", style="dim"))
        step = ""
        now = self.now()
        for turn in self._followed():
            if turn["turn_id"] in self.closed:
                continue
            for item in turn["timeline"][self.cursor.get(turn["turn_id"], 0) :]:
                parts += item_lines(self.state, turn, item, 1, reasoning=self.reasoning)
            if turn["plan"]:
                parts += plan_lines(list(turn["plan"]), 1)
            step = current_step(turn, now)
        if not step:
            followed = self._followed()
            ended = followed and all(t["turn_id"] in self.closed for t in followed)
            step = "done" if ended else "waiting for the task to start"
        spinner_text = self.status or step
        parts.append(Spinner("dots", text=SafeText(spinner_text, style="cyan")))
        return Group(*parts)

    def _print(self, *lines: RenderableType) -> None:
        if self.json_lines or not lines:
            return
        target = self._live.console if self._live is not None else self.console
        for line in lines:
            target.print(line)

    def _show(self) -> None:
        if self.json_lines or not self.console.is_terminal or self._live is not None:
            return
        # Drawn afresh at every refresh, so a retry's countdown moves between actions too.
        self._live = Live(
            _Drawn(self._footer), console=self.console, refresh_per_second=10, transient=True
        )
        self._live.start()

    def _hide(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()
        elif not self.json_lines:
            self._report_activity()

    def _report_activity(self) -> None:
        """Without a live footer (piped), say each model retry once, on stderr. (Waiting for
        the model is not reported there: it happens at every step and would be noise.)"""
        for turn in self._followed():
            retry = turn["model_retry"] if turn["state"] != "ended" else None
            text = model_retry_text(retry) if retry is not None else ""
            if text != self._activity.get(turn["turn_id"], ""):
                self._activity[turn["turn_id"]] = text
                if text:
                    self.stderr.print(SafeText(text, style="yellow"), soft_wrap=True)

    # -- input requests ------------------------------------------------------------------

    def _requests(self, followed: list[Turn]) -> None:
        open_requests = [
            (turn, request)
            for turn in followed
            for request in turn["input_requests"].values()
            if request["status"] == "open"
        ]
        asking = self._prompt_request
        if asking is not None and not any(r["request_id"] == asking for _, r in open_requests):
            resolution = self._resolution(asking) or {}
            by = resolution.get("answered_by") or {}
            if by.get("client_id") != self.session.client.client_id:
                self._withdraw(asking, resolution)
            # else: our own answer won; the question finishes by itself and says so.
        for turn, request in open_requests:
            rid = request["request_id"]
            if self.prompt and self._prompt_task is None and rid not in self.asked:
                self.asked.add(rid)
                self._prompt_request = rid
                self._prompt_task = asyncio.ensure_future(self._ask(turn, request))
            elif not self.prompt and rid not in self.hinted:
                self.hinted.add(rid)
                option = next(iter(request["options"] or []), {}).get("option_id")
                answer = f"--option {option}" if option else '--text "…"'
                self.stderr.print(
                    SafeText.assemble(
                        ("waiting for input", "yellow"), f" {rid}: {request['prompt']}"
                    )
                )
                self.stderr.print(*self._asked_about(turn, request))
                self.stderr.print(
                    SafeText(
                        "  answer from anywhere: "
                        f"nua answer {self.state['session_id']} {rid} {answer}"
                    ),
                    soft_wrap=True,
                )

    def _withdraw(self, request_id: str, resolution: dict[str, Any]) -> None:
        """Another client resolved the request we are asking about: stop asking, say who."""
        if self._prompt_task is not None:
            self._prompt_task.cancel()
        self._prompt_task = self._prompt_request = None
        if resolution.get("status") == "resolved":
            message = who_answered({**resolution, "request_id": request_id})
            self.stderr.print(SafeText(f"\n{message}", style="yellow"), soft_wrap=True)
        self._show()

    def _resolution(self, request_id: str) -> dict[str, Any] | None:
        for turn in self.state["turns"]:
            request = turn["input_requests"].get(request_id)
            if request is not None:
                return dict(request)
        return None

    async def _cancel_prompt(self) -> None:
        if self._prompt_task is not None:
            self._prompt_task.cancel()
            with contextlib.suppress(BaseException):
                await self._prompt_task

    @staticmethod
    def _asked_about(turn: Turn, request: InputRequest) -> list[RenderableType]:
        """The tool call a request asks about, its input whole: what the answer decides."""
        call = turn["tool_calls"].get(request["tool_call_id"] or "")
        if call is None:
            return []
        head = SafeText(f"  {call['title'] or call['name']} ({call['name']}), input in full:")
        return [head, *input_lines(call["input"], 2)]

    async def _ask(self, turn: Turn, request: InputRequest) -> None:
        self._hide()
        out = self.console
        rid = request["request_id"]
        out.print(SafeText(f"? {request['prompt']}", style="bold yellow"))
        out.print(*self._asked_about(turn, request))
        options = request["options"] or []
        for number, option in enumerate(options, 1):
            out.print(SafeText(f"  {number}) {option.get('name')} [{option.get('option_id')}]"))
        while True:
            hint = f"1-{len(options)} or an option id" if options else "your answer"
            out.print(SafeText(f"  answer ({hint}): "), end="")
            line = await self.lines.readline()
            if not sys.stdin.isatty():
                out.print()  # nobody typed Enter on a terminal: end the prompt line ourselves
            if line is None:
                self.prompt = False  # stdin is closed: nobody can answer here
                self.stderr.print(
                    f"\nno input; answer from anywhere: nua answer {self.state['session_id']} "
                    f"{rid} --option <id>",
                    soft_wrap=True,
                )
                break
            answer = _parse_answer(line.strip(), options)
            if answer is None:
                out.print(SafeText("  not one of the options", style="red"))
                continue
            try:
                resolution = await self.session.answer(rid, **answer)
            except ConflictError as exc:
                message = who_answered(exc.resolution) if exc.resolution else exc.detail
                self.stderr.print(SafeText(f"conflict: {message}", style="yellow"), soft_wrap=True)
            except GoneError as exc:
                self.stderr.print(
                    SafeText(f"too late: {exc.detail}", style="yellow"), soft_wrap=True
                )
            except InvalidRequestError as exc:
                out.print(SafeText(f"  {exc.detail}", style="red"))
                continue
            else:
                choice = resolution.get("option_id") or json.dumps(resolution.get("payload"))
                out.print(SafeText(f"  answered: {choice}", style="green"))
            break
        self._show()


class _Drawn:
    """A renderable that asks `draw` for its content each time it is rendered."""

    def __init__(self, draw: Callable[[], RenderableType]) -> None:
        self._draw = draw

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._draw()


def _parse_answer(line: str, options: list[dict[str, Any]]) -> dict[str, Any] | None:
    if options:
        if line.isdigit() and 1 <= int(line) <= len(options):
            return {"option_id": options[int(line) - 1]["option_id"]}
        for option in options:
            if line in (option.get("option_id"), option.get("name")):
                return {"option_id": option["option_id"]}
        return None
    if not line:
        return None
    return {"payload": line}
