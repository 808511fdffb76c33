"""The outbox: sending each delivery to the homeserver, and telling the Host how it fared.

Deliveries are sent one at a time per room, in the order they were queued, with their
delivery id as the Matrix transaction id. A transient failure (transport, 5xx, 429) is
retried with backoff and jitter; a final one, or too many tries, is `failed`. Every state
change is written with the report it owes the Host in one ledger transaction, and the
reports are sent in order; nothing here blocks the agent or the room's reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from opennua._common import RetryPolicy
from opennua.client import ApiError, Client, ClientError, ServerError, UnreachableError
from opennua.protocol import ReportDelivery

from . import _render as r
from ._deliveries import DeliveryState, report
from ._ledger import Ledger, Outgoing
from ._matrix import Matrix, MatrixError
from ._tracing import DeliverySpans

_log = logging.getLogger(__name__)


class Outbox:
    def __init__(
        self,
        ledger: Ledger,
        matrix: Matrix,
        host: Client,
        *,
        retry: RetryPolicy,
        client_id: str,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float],
        spans: DeliverySpans | None = None,
    ) -> None:
        self.ledger = ledger
        self.matrix = matrix
        self.host = host
        self.retry = retry
        self.client_id = client_id
        self._clock = clock
        self._rand = rand
        #: With tracing on: each try of a turn's delivery is a span of the turn's trace.
        self.spans = spans
        self._wake_send = asyncio.Event()
        self._wake_report = asyncio.Event()
        #: Room -> set once its try in flight is recorded (see `recorded`).
        self._in_flight: dict[str, asyncio.Event] = {}

    def enqueue(self, out: Outgoing) -> bool:
        """Queue a delivery unless its identity is known; True when it is new."""
        new = self.ledger.enqueue(out, self.report_body(out.state))
        if new:
            self._wake_send.set()
            self._wake_report.set()
        return new

    async def send_loop(self) -> None:
        """Run until cancelled: send due deliveries, each room in order."""
        while True:
            self._wake_send.clear()
            waits: list[float] = []
            blocked: set[str] = set()
            for out in self.ledger.open_deliveries():
                room = out.state.room_id
                if room in blocked:
                    continue
                blocked.add(room)  # each room in order: one delivery at a time
                due = out.state.next_at
                if due is not None and due > self._clock():
                    waits.append(due - self._clock())
                    continue
                await self._attempt(out)
                waits.append(0.0)
            timeout = min(waits, default=1.0)
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake_send.wait(), min(timeout, 1.0))

    async def recorded(self, room_id: str) -> None:
        """Return once no try in `room_id` is between its send and its record. A person can
        react to a message before its send's answer (the event id) is read: under load
        the sync that brings the reaction may be handled first. Looked up after this, the
        event is known if it is ours."""
        pending = self._in_flight.get(room_id)
        if pending is not None:
            await pending.wait()

    async def _attempt(self, out: Outgoing) -> None:
        start_ns = time.time_ns()
        done = self._in_flight[out.state.room_id] = asyncio.Event()
        try:
            new = await self._try(out)
            self.ledger.update(new, self.report_body(new))
        finally:
            del self._in_flight[out.state.room_id]
            done.set()
        self._wake_report.set()
        if self.spans is not None:
            await self._span(self.spans, new, out.event_type, start_ns)

    async def _span(
        self, spans: DeliverySpans, tried: DeliveryState, event_type: str, start_ns: int
    ) -> None:
        end_ns = time.time_ns()
        try:
            turn = self.ledger.turn_of(tried.delivery_id)
            if turn is not None:
                await spans.emit(turn, tried, event_type, start_ns, end_ns)
        except Exception:
            # Tracing never stops a delivery.
            _log.warning("no span for delivery %s", tried.delivery_id, exc_info=True)

    async def _try(self, out: Outgoing) -> DeliveryState:
        """Send `out` once: the delivery's state after this try."""
        state = out.state
        try:
            content = await self._content(out)
            event_id = await self.matrix.send(
                state.room_id, out.event_type, state.delivery_id, content
            )
        except MatrixError as exc:
            attempts = state.attempts + 1
            if self.retry.gives_up(attempts, not exc.transient):
                new = replace(
                    state, status="failed", attempts=attempts, next_at=None,
                    error_code=exc.code, error_message=exc.message,
                )  # fmt: skip
            else:
                wait = self.retry.delay(attempts, self._rand())
                new = replace(
                    state, status="retrying", attempts=attempts, next_at=self._clock() + wait,
                    error_code=exc.code, error_message=exc.message,
                )  # fmt: skip
        except ClientError as exc:
            # The artifact could not be read from the Host: try again later, like a 5xx.
            attempts = state.attempts + 1
            wait = self.retry.delay(attempts, self._rand())
            new = replace(
                state, status="retrying", attempts=attempts, next_at=self._clock() + wait,
                error_code="host_unreachable", error_message=str(exc),
            )  # fmt: skip
        else:
            new = replace(
                state, status="sent", attempts=state.attempts + 1, event_id=event_id,
                next_at=None, error_code=None, error_message=None,
            )  # fmt: skip
        return new

    async def _content(self, out: Outgoing) -> dict[str, Any]:
        """The event content, completed with what is known only now (the target's event
        id, the uploaded file's URI)."""
        if out.parent is not None:
            parent = self.ledger.get(out.parent)
            if parent is None or parent.state.status == "failed":
                raise MatrixError("parent_failed", "the message this changes was not sent",
                                  transient=False)  # fmt: skip
            target = parent.state.event_id
            assert target is not None, "a room's deliveries go in order"
            if out.event_type == "m.reaction":
                return r.reaction_content(target, str(out.content["key"]))
            return r.edit_content(target, str(out.content["body"]), str(out.content["html"]))
        if out.state.kind == "upload":
            return await self._file(out)
        return out.content

    async def _file(self, out: Outgoing) -> dict[str, Any]:
        artifact = out.content["artifact"]
        mxc = self.ledger.upload(out.state.delivery_id)
        if mxc is None:
            # Uploads have no transaction id: the URI is kept so a retry does not upload
            # again (a crash in between leaves an unused blob, never a second message).
            # Through a single-use link: each upload is authorized for the bridge's
            # principal at the moment it reads, and the link is spent once read.
            _, data = await self.host.read_artifact_by_link(artifact["artifact_id"])
            mxc = await self.matrix.upload(data, artifact["name"], artifact["media_type"])
            self.ledger.set_upload(out.state.delivery_id, mxc)
        return {
            "msgtype": "m.file",
            "body": out.content["body"],
            "filename": artifact["name"],
            "url": mxc,
            "info": {"mimetype": artifact["media_type"], "size": artifact["size"]},
            "org.opennua.sha256": artifact["sha256"],
        }

    # -- report: the Host learns every change ---------------------------------------

    def report_body(self, state: DeliveryState) -> dict[str, Any]:
        due = None
        if state.next_at is not None:
            due = datetime.fromtimestamp(state.next_at, UTC).isoformat(timespec="milliseconds")
            due = due.replace("+00:00", "Z")
        return report(state, self.client_id, due).model_dump(mode="json")

    async def report_loop(self) -> None:
        """Run until cancelled: hand every state change to the Host, in order."""
        while True:
            self._wake_report.clear()
            stalled = False
            for n, session_id, body in self.ledger.reports():
                if session_id:
                    try:
                        await self.host.session(session_id).report_delivery(
                            ReportDelivery.model_validate(body)
                        )
                    except (UnreachableError, ServerError) as exc:
                        _log.warning("reporting a delivery: %s", exc)
                        stalled = True
                        break
                    except ApiError as exc:
                        _log.warning("the Host refused a delivery report: %s", exc)
                self.ledger.reported(n)
            if stalled:
                await asyncio.sleep(1.0)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake_report.wait(), 1.0)
