"""opennua.gateway: where a remote tool call crosses the boundary (docs/gateway.md).

Remote MCP servers and remote A2A agents are reached only through the `Gateway`: it checks
the execution's grant, the plugin's policy and egress list, injects the credential the
deployment refers to (from `opennua.secrets`), redacts it from what comes back, and
audits every call. The caller's own token is never forwarded.
"""

from ._audit import AuditLog
from ._egress import EGRESS_PATH
from ._proxy import A2A_PATH, PATH, Gateway
from ._redact import Redactor
from ._tickets import issue_ticket

__all__ = ["A2A_PATH", "EGRESS_PATH", "PATH", "AuditLog", "Gateway", "Redactor", "issue_ticket"]
