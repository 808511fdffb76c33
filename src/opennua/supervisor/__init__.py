"""The Supervisor: leases, epochs, attempts, deadlines, recovery.

Names load on first use (PEP 562), as in `opennua.runtime`: `nua serve` answers HTTP
before it imports the runtime the Supervisor drives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opennua import exports_on_demand

if TYPE_CHECKING:
    from opennua.supervisor._attempt import AttemptConfig, AttemptRunner, execution_dir
    from opennua.supervisor._journal import StoreJournal
    from opennua.supervisor._retention import DEFAULT_RETENTION, Collector
    from opennua.supervisor._supervisor import Supervisor

#: Where each public name lives.
_WHERE = {
    "DEFAULT_RETENTION": "_retention",
    "AttemptConfig": "_attempt",
    "AttemptRunner": "_attempt",
    "Collector": "_retention",
    "StoreJournal": "_journal",
    "Supervisor": "_supervisor",
    "execution_dir": "_attempt",
}

__all__ = [
    "DEFAULT_RETENTION",
    "AttemptConfig",
    "AttemptRunner",
    "Collector",
    "StoreJournal",
    "Supervisor",
    "execution_dir",
]
assert set(__all__) == set(_WHERE), "every public name needs its module"


__getattr__, __dir__ = exports_on_demand(__name__, _WHERE)
