"""opennua.auth: workspaces, principals, roles, API tokens and execution grants.

The policy (which role may do what, whether a grant holds) is pure and in `_policy`;
`Authority` is the one place a server authenticates a caller and checks them against an
object's workspace. See docs/auth.md.
"""

from ._authority import GRANT_TTL, Authority
from ._people import DEFAULT_WORKSPACE
from ._policy import (
    NEEDS,
    ROLES,
    Caller,
    Denied,
    Permission,
    Role,
    allows,
    grant_problem,
    may_assign,
)
from ._tokens import LEGACY_ID

__all__ = [
    "DEFAULT_WORKSPACE",
    "GRANT_TTL",
    "LEGACY_ID",
    "NEEDS",
    "ROLES",
    "Authority",
    "Caller",
    "Denied",
    "Permission",
    "Role",
    "allows",
    "grant_problem",
    "may_assign",
]
