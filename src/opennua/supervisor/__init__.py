"""The Supervisor: leases, epochs, attempts, deadlines, recovery."""

from opennua.supervisor._attempt import Attempt, AttemptConfig
from opennua.supervisor._journal import StoreJournal
from opennua.supervisor._supervisor import Supervisor

__all__ = ["Attempt", "AttemptConfig", "StoreJournal", "Supervisor"]
