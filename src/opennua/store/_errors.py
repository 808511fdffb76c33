"""The store's errors: one root, distinct types with structured fields.

Driver errors (sqlite3, psycopg) never leave the store; the backends translate them
at the edge with ``raise ... from exc`` so callers can tell a fence from a conflict.
"""

from __future__ import annotations


class StoreError(Exception):
    """Root of every error the store raises."""


class NotFound(StoreError):
    """A record the operation needs does not exist."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class WriteConflict(StoreError):
    """A write collided with an existing record or a state it may not move from."""

    def __init__(self, kind: str, key: str, reason: str) -> None:
        super().__init__(f"{kind} {key!r}: {reason}")
        self.kind = kind
        self.key = key
        self.reason = reason


class SessionBusy(WriteConflict):
    """A unit that needs the session idle found an active execution (``if_busy=reject``)."""

    def __init__(self, session_id: str) -> None:
        super().__init__("session", session_id, "busy: a turn is already active")
        self.session_id = session_id


class QuotaExceeded(StoreError):
    """Holding one more blob would take a workspace past its storage quota (bytes)."""

    def __init__(self, workspace_id: str, used: int, quota: int, size: int) -> None:
        super().__init__(
            f"workspace {workspace_id!r} holds {used} bytes; {size} more would pass its "
            f"quota of {quota}"
        )
        self.workspace_id = workspace_id
        self.used = used
        self.quota = quota
        self.size = size


class InvalidInput(StoreError):
    """The caller passed something the store cannot record (e.g. an action without an id)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Fenced(StoreError):
    """The attempt no longer owns the execution: stop at once, the next attempt re-reads.

    ``current_epoch`` is the epoch found (None when the execution is gone) and
    ``status`` its current status, so logs can say who took over.
    """

    def __init__(
        self, execution_id: str, epoch: int, current_epoch: int | None, status: str | None = None
    ) -> None:
        super().__init__(
            f"execution {execution_id!r} fenced: epoch {epoch} is stale "
            f"(current epoch {current_epoch}, status {status})"
        )
        self.execution_id = execution_id
        self.epoch = epoch
        self.current_epoch = current_epoch
        self.status = status


class CommitUnknown(Fenced):
    """The connection failed while committing: the unit may or may not be durable.

    A subclass of :class:`Fenced` on purpose: docs/architecture.md §4 says an attempt treats an
    unknown commit outcome exactly like being fenced (stop; the next attempt re-reads).
    ``execution_id``/``epoch`` name the fence when the unit had one, else "" and -1.
    """

    def __init__(self, detail: str, execution_id: str = "", epoch: int = -1) -> None:
        StoreError.__init__(self, f"commit outcome unknown: {detail}")
        self.execution_id = execution_id
        self.epoch = epoch
        self.current_epoch = None
        self.status = None
        self.detail = detail


class Unavailable(StoreError):
    """The database could not be reached or failed before commit; nothing was written."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class IdempotencyMismatch(StoreError):
    """An idempotency key was reused with a different request (the Host maps it to 422)."""

    def __init__(self, scope: str, key: str) -> None:
        super().__init__(f"idempotency key {key!r} in {scope!r} reused with another request")
        self.scope = scope
        self.key = key


class SchemaTooNew(StoreError):
    """The database was migrated by a newer opennua; refusing to touch it."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"database schema version {found} is newer than this opennua supports "
            f"({supported}); upgrade opennua"
        )
        self.found = found
        self.supported = supported


class BlobCorrupted(StoreError):
    """A blob's bytes no longer hash to its name."""

    def __init__(self, sha256: str, actual: str) -> None:
        super().__init__(f"blob {sha256} is corrupted (content hashes to {actual})")
        self.sha256 = sha256
        self.actual = actual


def unit_failure(exc: Exception, backend: str) -> StoreError:
    """What the caller of a unit that raised ``exc`` gets, the unit rolled back.

    A store error stays as it is; a string the driver could not encode is the caller's
    bad input; anything else is a bug, reported as ``Unavailable`` (nothing was written)
    with the original as its cause.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, UnicodeEncodeError):
        error: StoreError = not_utf8(exc, "a value")
    else:
        error = Unavailable(f"{backend}: unexpected error in a unit: {exc!r}")
    error.__cause__ = exc
    return error


def not_utf8(exc: UnicodeEncodeError, what: str) -> InvalidInput:
    """The error for a string that has no UTF-8 encoding (it holds a lone surrogate)."""
    return InvalidInput(
        f"{what} cannot be stored: it contains {exc.object[exc.start : exc.end]!a}, "
        "a lone surrogate, which is not valid UTF-8"
    )
