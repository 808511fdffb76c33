"""opennua.store: every durable fact, on SQLite or PostgreSQL, plus content-addressed blobs.

See docs/store.md for the contract, units of work, group commit and claim ordering.
"""

from ._auth import (
    GrantRecord,
    MembershipRecord,
    PrincipalRecord,
    TokenRecord,
    UsageRow,
    WorkspaceRecord,
)
from ._automation import (
    DeliveryRecord,
    FireRecord,
    HookRecord,
    RefusalRecord,
    ScheduleRecord,
    SchedulerLease,
)
from ._base import Store
from ._blobs import BlobRef, BlobStore
from ._blobs_file import FileBlobStore
from ._errors import (
    BlobCorrupted,
    CommitUnknown,
    Fenced,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    QuotaExceeded,
    SchemaTooNew,
    SessionBusy,
    StoreError,
    Unavailable,
    WriteConflict,
)
from ._executions import (
    ACTIVE_STATUSES,
    AttemptRecord,
    Checkpoint,
    CheckpointPart,
    Claimed,
    Execution,
    Lease,
    LedgerEntry,
)
from ._facts import AnswerFacts, GrantFacts
from ._files import ArtifactRecord
from ._inputs import InputRequestRecord, Lost, Won
from ._log import (
    InFlight,
    Mismatch,
    New,
    Page,
    Replay,
    SessionFilter,
    SessionRecord,
    SessionSummary,
    Snapshot,
    snapshot_due,
)
from ._open import open_store
from ._registry import (
    ChannelMove,
    DeploymentRecord,
    PluginFile,
    PluginVersion,
    Visibility,
    channel_target,
)
from ._roles import (
    MAX_SNAPSHOTS_DUE,
    ExecutionJournal,
    FileStore,
    InputStore,
    LogStore,
    RegistryStore,
)
from ._roles_access import AuthStore, GatewayStore, SealedSecretStore
from ._roles_automation import AutomationStore, SubscriptionStore
from ._secrets import AuditKind, AuditRecord, GatewayFacts, KeyCheck, SealedSecret
from ._subscriptions import BehindSession, DeliveryState, EventDelivery, SubscriptionRecord
from ._unit import FencedTransaction, Handle, Transaction
from ._watch import Watcher

__all__ = [
    "ACTIVE_STATUSES",
    "MAX_SNAPSHOTS_DUE",
    "AnswerFacts",
    "ArtifactRecord",
    "AttemptRecord",
    "AuditKind",
    "AuditRecord",
    "AuthStore",
    "AutomationStore",
    "BehindSession",
    "BlobCorrupted",
    "BlobRef",
    "BlobStore",
    "ChannelMove",
    "Checkpoint",
    "CheckpointPart",
    "Claimed",
    "CommitUnknown",
    "DeliveryRecord",
    "DeliveryState",
    "DeploymentRecord",
    "EventDelivery",
    "Execution",
    "ExecutionJournal",
    "Fenced",
    "FencedTransaction",
    "FileBlobStore",
    "FileStore",
    "FireRecord",
    "GatewayFacts",
    "GatewayStore",
    "GrantFacts",
    "GrantRecord",
    "Handle",
    "HookRecord",
    "IdempotencyMismatch",
    "InFlight",
    "InputRequestRecord",
    "InputStore",
    "InvalidInput",
    "KeyCheck",
    "Lease",
    "LedgerEntry",
    "LogStore",
    "Lost",
    "MembershipRecord",
    "Mismatch",
    "New",
    "NotFound",
    "Page",
    "PluginFile",
    "PluginVersion",
    "PrincipalRecord",
    "QuotaExceeded",
    "RefusalRecord",
    "RegistryStore",
    "Replay",
    "ScheduleRecord",
    "SchedulerLease",
    "SchemaTooNew",
    "SealedSecret",
    "SealedSecretStore",
    "SessionBusy",
    "SessionFilter",
    "SessionRecord",
    "SessionSummary",
    "Snapshot",
    "Store",
    "StoreError",
    "SubscriptionRecord",
    "SubscriptionStore",
    "TokenRecord",
    "Transaction",
    "Unavailable",
    "UsageRow",
    "Visibility",
    "Watcher",
    "Won",
    "WorkspaceRecord",
    "WriteConflict",
    "channel_target",
    "open_store",
    "snapshot_due",
]
