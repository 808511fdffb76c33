"""An execution's grant with the facts it is judged by (its principal, their role in the
grant's workspace, its token), read in one query wherever a grant is checked: at every
heartbeat, when an answer is accepted, by the gateway, when rights change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._auth import GRANT_COLS, PRINCIPAL_COLS, TOKEN_COLS, GrantRecord, PrincipalRecord, TokenRecord
from ._errors import NotFound
from ._executions import EXEC_COLS, Execution
from ._inputs import INPUT_COLS, InputRequestRecord
from ._sql import Program, Query, Row

#: An execution's grant with the facts it is judged by: its principal, their role in the
#: grant's workspace, the token it came with (None where that row is gone).
GrantFacts = tuple[GrantRecord, PrincipalRecord | None, str | None, TokenRecord | None]


# A grant `g` with its facts: the select list and the joins that feed it. A token revoked
# for the grant's workspace only (`r`) is, for this grant, a revoked token.
_GRANT_FACT_COLS = f"{GRANT_COLS.of('g')}, {PRINCIPAL_COLS.of('p')}, m.role, " + TOKEN_COLS.of(
    "t"
).replace("t.revoked_at", "COALESCE(t.revoked_at, r.revoked_at)")
_GRANT_FACT_JOINS = (
    "LEFT JOIN principals p ON p.principal_id = g.principal_id "
    "LEFT JOIN memberships m ON m.workspace_id = g.workspace_id "
    "AND m.principal_id = g.principal_id "
    "LEFT JOIN api_tokens t ON t.token_id = g.token_id "
    "LEFT JOIN token_workspace_revocations r ON r.token_id = g.token_id "
    "AND r.workspace_id = g.workspace_id "
)
_G, _P, _T = len(GRANT_COLS), len(PRINCIPAL_COLS), len(TOKEN_COLS)
_GRANT_FACT_N = _G + _P + 1 + _T


def _grant_facts(r: Row) -> GrantFacts | None:
    g, p, role, t = r[:_G], r[_G : _G + _P], r[_G + _P], r[_G + _P + 1 : _G + _P + 1 + _T]
    if g[0] is None:
        return None
    return (
        GRANT_COLS.read(g),
        PRINCIPAL_COLS.read(p) if p[0] is not None else None,
        role,
        TOKEN_COLS.read(t) if t[0] is not None else None,
    )


def grant_facts(execution_id: str) -> Program[GrantFacts | None]:
    """An execution's grant with the facts it is checked against, in one query: it runs
    at every heartbeat."""
    rows = yield Query(
        f"SELECT {_GRANT_FACT_COLS} FROM execution_grants g {_GRANT_FACT_JOINS}"
        "WHERE g.execution_id = ?",
        (execution_id,),
    )
    return _grant_facts(rows[0]) if rows else None


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerFacts:
    """What accepting an answer reads: the input request, its execution, and the
    execution's grant with its facts (None: no grant)."""

    request: InputRequestRecord
    execution: Execution
    grant: GrantFacts | None


_INPUT_N = len(INPUT_COLS)
_EXEC_N = len(EXEC_COLS)


def answer_facts(request_id: str) -> Program[AnswerFacts]:
    """In one query (one round trip on either backend): an answer is checked against
    all of it at the moment it is accepted."""
    rows = yield Query(
        f"SELECT {INPUT_COLS.of('i')}, {EXEC_COLS.of('e')}, {_GRANT_FACT_COLS} "
        "FROM input_requests i "
        "LEFT JOIN executions e ON e.execution_id = i.execution_id "
        "LEFT JOIN execution_grants g ON g.execution_id = i.execution_id "
        f"{_GRANT_FACT_JOINS}WHERE i.request_id = ?",
        (request_id,),
    )
    if not rows:
        raise NotFound("input request", request_id)
    r = rows[0]
    request = INPUT_COLS.read(r[:_INPUT_N])
    e = r[_INPUT_N : _INPUT_N + _EXEC_N]
    if e[0] is None:
        raise NotFound("execution", request.execution_id)
    return AnswerFacts(
        request=request,
        execution=EXEC_COLS.read(e),
        grant=_grant_facts(r[_INPUT_N + _EXEC_N :]),
    )


#: Columns of `execution_facts_sql` before the caller's own.
EXECUTION_FACTS_N = _EXEC_N + _GRANT_FACT_N


def execution_facts_sql(more_cols: str = "", more_joins: str = "") -> str:
    """One statement for an execution `e` with its grant `g` and the grant's facts, plus
    the caller's columns and joins (their parameters come before the execution id)."""
    return (
        f"SELECT {EXEC_COLS.of('e')}, {_GRANT_FACT_COLS}{more_cols} FROM executions e "
        "LEFT JOIN execution_grants g ON g.execution_id = e.execution_id "
        f"{_GRANT_FACT_JOINS}{more_joins}WHERE e.execution_id = ?"
    )


def execution_facts_from_row(r: Row) -> tuple[Execution, GrantFacts | None]:
    return EXEC_COLS.read(r[:_EXEC_N]), _grant_facts(r[_EXEC_N:EXECUTION_FACTS_N])


def unowned_with_grants(
    principal_ids: Sequence[str],
) -> Program[list[tuple[Execution, GrantFacts | None]]]:
    """The queued or parked executions nobody runs whose live grant is one of these
    principals', each with its grant's facts: what a change of their rights may end."""
    if not principal_ids:
        return []
    marks = ",".join("?" * len(principal_ids))
    rows = yield Query(
        f"SELECT {EXEC_COLS.of('e')}, {_GRANT_FACT_COLS} FROM executions e "
        "JOIN execution_grants g ON g.execution_id = e.execution_id "
        f"{_GRANT_FACT_JOINS}WHERE e.status IN ('queued', 'waiting_input') "
        f"AND e.owner IS NULL AND g.revoked_at IS NULL AND g.principal_id IN ({marks}) "
        "ORDER BY e.execution_id",
        list(principal_ids),
    )
    return [execution_facts_from_row(r) for r in rows]
