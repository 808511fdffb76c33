"""The Supervisor: leases, epochs, attempts, deadlines, recovery."""

from opennua.supervisor._attempt import AttemptConfig, AttemptRunner, execution_workspace
from opennua.supervisor._journal import StoreJournal
from opennua.supervisor._retention import DEFAULT_RETENTION, Collector
from opennua.supervisor._supervisor import Supervisor

__all__ = [
    "DEFAULT_RETENTION",
    "AttemptConfig",
    "AttemptRunner",
    "Collector",
    "StoreJournal",
    "Supervisor",
    "execution_workspace",
]
