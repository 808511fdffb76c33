"""opennua.store: every durable fact, on SQLite or PostgreSQL, plus content-addressed blobs.

See docs/store.md for the contract, units of work, group commit and claim ordering.
"""

from ._base import Store
from ._blobs import BlobRef, BlobStore
from ._errors import (
    BlobCorrupted,
    CommitUnknown,
    Conflict,
    Fenced,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    SchemaTooNew,
    StoreError,
    Unavailable,
)
from ._open import open_store
from ._records import (
    Artifact,
    Attempt,
    Checkpoint,
    CheckpointRecord,
    Claimed,
    Execution,
    InFlight,
    InputRequest,
    Lease,
    LedgerEntry,
    Lost,
    Mismatch,
    New,
    Page,
    Replay,
    Session,
    Snapshot,
    Won,
)
from ._unit import FencedTransaction, Handle, Transaction
from ._watch import Watcher

__all__ = [
    "Artifact",
    "Attempt",
    "BlobCorrupted",
    "BlobRef",
    "BlobStore",
    "Checkpoint",
    "CheckpointRecord",
    "Claimed",
    "CommitUnknown",
    "Conflict",
    "Execution",
    "Fenced",
    "FencedTransaction",
    "Handle",
    "IdempotencyMismatch",
    "InFlight",
    "InputRequest",
    "InvalidInput",
    "Lease",
    "LedgerEntry",
    "Lost",
    "Mismatch",
    "New",
    "NotFound",
    "Page",
    "Replay",
    "SchemaTooNew",
    "Session",
    "Snapshot",
    "Store",
    "StoreError",
    "Transaction",
    "Unavailable",
    "Watcher",
    "Won",
    "open_store",
]
