"""The one place a server asks "who is this?" and "may they?", over the store's facts.

`Authority` authenticates tokens and cookies, answers for an object's workspace, manages
workspaces, principals, memberships and tokens, and keeps execution grants. The policy
itself is `_policy` (pure); this module is the I/O around it.

Lookups are cached for `cache_seconds` (default 1 s) so that a request does not pay for
three store reads; every change made through this Authority drops the cache at once, and
a change made by another process is seen within `cache_seconds`. Where an object lives is
cached for as long as it lives: an object never moves to another workspace (a session
from before workspaces joins the default one once, and is not cached until it has).
Execution grants are never cached: `grant_problem` judges the facts as read in the same
request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ulid import ULID

from opennua.store import (
    GrantFacts,
    GrantRecord,
    MembershipRecord,
    New,
    NotFound,
    PrincipalRecord,
    Store,
    TokenRecord,
    WorkspaceRecord,
    WriteConflict,
)

from . import _tokens
from ._links import LINK_TTL, LinkClaims, decode_link, encode_link, mac_matches
from ._policy import (
    ROLES,
    Caller,
    Permission,
    Role,
    allows,
    grant_problem,
    may_assign,
    token_problem,
)

T = TypeVar("T")
Clock = Callable[[], float]
#: A grant lasts this long unless renewed with the lease.
GRANT_TTL = 300.0
DEFAULT_WORKSPACE = "default"
DEFAULT_OWNER = "owner"


class Denied(Exception):
    """A refusal with its problem `code`: `unauthorized`/`token_*` (401), `not_found`
    (404: the object is in a workspace the caller is not in), a 403 code otherwise."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def new_id(prefix: str, now: float) -> str:
    return f"{prefix}_{ULID.from_timestamp(now)}"


class Authority:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = time.time,
        cache_seconds: float = 1.0,
        grant_ttl: float = GRANT_TTL,
    ) -> None:
        self.store = store
        self._clock = clock
        self._cache_seconds = cache_seconds
        self.grant_ttl = grant_ttl
        self._cache: dict[Any, tuple[float, Any]] = {}
        self._placements: dict[tuple[str, str], str] = {}

    # -- caching -----------------------------------------------------------------------

    async def _cached(self, key: Any, load: Callable[[], Awaitable[T]]) -> T:
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self._cache_seconds:
            value: T = hit[1]
            return value
        value = await load()
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (now, value)
        return value

    async def _placed(
        self, kind: str, object_id: str, load: Callable[[], Awaitable[str | None]]
    ) -> str | None:
        key = (kind, object_id)
        workspace_id = self._placements.get(key)
        if workspace_id is None:
            workspace_id = await load()
            if workspace_id is not None:
                if len(self._placements) > 100_000:
                    self._placements.clear()
                self._placements[key] = workspace_id
        return workspace_id

    def forget(self) -> None:
        """Drop every cached lookup (after a change of principals, roles or tokens)."""
        self._cache.clear()

    async def _token(self, token_id: str) -> TokenRecord | None:
        async def load() -> TokenRecord | None:
            try:
                return await self.store.get_token(token_id)
            except NotFound:
                return None

        return await self._cached(("token", token_id), load)

    async def _caller(self, token: TokenRecord) -> Caller:
        async def load() -> Caller:
            principal = await self.store.get_principal(token.principal_id)
            if principal.disabled_at is not None:
                raise Denied("principal_disabled", "this principal is disabled")
            memberships = await self.store.list_memberships(principal_id=principal.principal_id)
            return Caller(
                principal_id=principal.principal_id,
                kind=principal.kind,
                name=principal.name,
                token_id=token.token_id,
                roles={m.workspace_id: m.role for m in memberships},
            )

        try:
            return await self._cached(("caller", token.token_id), load)
        except NotFound as exc:
            raise Denied("unauthorized", "the token's principal no longer exists") from exc

    # -- authentication -------------------------------------------------------------------

    async def authenticate(self, token: str) -> Caller:
        """The caller a bearer token stands for, or `Denied` (401)."""
        # The hot path of every request: a token seen within `cache_seconds` is one
        # digest and one dict read (keyed by the digest: no token is kept in memory).
        key = ("bearer", hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest())
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._cache_seconds:
            record, caller = hit[1]
            if token_problem(record, self._clock()) is None:
                return caller  # type: ignore[no-any-return]
        token_id, secret = _tokens.split(token)
        record = await self._token(token_id)
        # Compare against a hash even when the id is unknown, so timing says nothing.
        stored = record.secret_hash if record is not None else _tokens.secret_hash("")
        if not _tokens.matches(secret, stored) or record is None:
            raise Denied("unauthorized", "the bearer token is not valid")
        caller = await self._checked(record)
        self._cache[key] = (time.monotonic(), (record, caller))
        return caller

    async def _checked(self, record: TokenRecord) -> Caller:
        problem = token_problem(record, self._clock())
        if problem is not None:
            raise Denied(problem, f"the token {record.token_id} is {problem.split('_')[1]}")
        return await self._caller(record)

    async def issue_cookie(self, token: str, max_age: int) -> str:
        """`<token id>.<expiry>.<mac>` for a valid token: signed with the token's stored
        hash (which no client ever sees), so the cookie is not the token, an edited one
        opens nothing, and revoking the token ends the cookie too."""
        await self.authenticate(token)
        token_id, secret = _tokens.split(token)
        expires = str(int(self._clock()) + max_age)
        return f"{token_id}.{expires}.{_cookie_mac(_tokens.secret_hash(secret), token_id, expires)}"

    async def authenticate_cookie(self, value: str) -> Caller:
        token_id, _, rest = value.partition(".")
        expires, _, mac = rest.partition(".")
        if not (expires.isascii() and expires.isdigit() and len(expires) <= 12):
            raise Denied("unauthorized", "the login cookie is not valid")
        record = await self._token(token_id)
        if record is None or not hmac.compare_digest(
            mac.encode(), _cookie_mac(record.secret_hash, token_id, expires).encode()
        ):
            raise Denied("unauthorized", "the login cookie is not valid")
        if int(expires) <= self._clock():
            raise Denied("unauthorized", "the login has expired: log in again")
        return await self._checked(record)

    # -- authorization --------------------------------------------------------------------

    def check(self, caller: Caller, workspace_id: str | None, permission: Permission) -> None:
        """Raise `Denied`: `not_found` when the caller is not in the object's workspace
        (its existence does not leak), `insufficient_role` when their role is too low."""
        role = caller.role_in(workspace_id)
        if role is None:
            raise Denied("not_found", "no such object")
        if not allows(role, permission):
            raise Denied("insufficient_role", f"a {role} may not do this here")

    async def session_workspace(self, session_id: str) -> str | None:
        async def load() -> str | None:
            return (await self.store.get_session(session_id)).workspace_id

        return await self._placed("session", session_id, load)

    async def execution_workspace(self, execution_id: str) -> str | None:
        async def load() -> str | None:
            execution = await self.store.get_execution(execution_id)
            return await self.session_workspace(execution.session_id)

        return await self._placed("execution", execution_id, load)

    async def artifact_workspace(self, artifact_id: str) -> str | None:
        async def load() -> str | None:
            artifact = await self.store.get_artifact(artifact_id)
            return await self.session_workspace(artifact.session_id)

        return await self._placed("artifact", artifact_id, load)

    async def schedule_workspace(self, schedule_id: str) -> str | None:
        async def load() -> str | None:
            return (await self.store.get_schedule(schedule_id)).workspace_id

        return await self._placed("schedule", schedule_id, load)

    async def hook_workspace(self, hook_id: str) -> str | None:
        async def load() -> str | None:
            return (await self.store.get_hook(hook_id)).workspace_id

        return await self._placed("hook", hook_id, load)

    async def registry_workspace(self, kind: str, name: str) -> str | None:
        """The workspace a plugin or deployment name belongs to; None for a server-wide one
        (the built-in) or a name nobody has taken yet (the route's workspace decides)."""
        try:
            if kind == "plugin":
                return (await self.store.list_plugin_versions(name))[0].workspace_id
            return (await self.store.get_deployment(name)).workspace_id
        except NotFound:
            return None

    async def may_read_artifact(self, caller: Caller, artifact_id: str) -> bool:
        """May `caller` read artifact `artifact_id` now (for every download, also by link)."""
        try:
            workspace_id = await self.artifact_workspace(artifact_id)
        except NotFound:
            return False
        return allows(caller.role_in(workspace_id), "read")

    # -- download links -------------------------------------------------------------------

    async def mint_download_link(self, caller: Caller, artifact_id: str) -> tuple[str, float]:
        """A single-use link to `artifact_id` for `caller` (who may read it now) and its
        expiry. Bound to the caller's token: revoking it, or losing the right to read the
        artifact, closes the link before it is used."""
        if not await self.may_read_artifact(caller, artifact_id):
            raise Denied("not_found", "no such artifact")
        record = await self._token(caller.token_id)
        if record is None:
            raise Denied("unauthorized", "the token no longer exists")
        expires = int(self._clock() + LINK_TTL)
        claims = LinkClaims(
            caller.token_id, caller.principal_id, artifact_id, expires, secrets.token_hex(16)
        )
        return encode_link(claims, record.secret_hash), float(expires)

    async def redeem_download_link(self, link: str) -> tuple[Caller, str]:
        """The caller and artifact a link opens, re-authorized now and spent: `Denied`
        `not_found` (not a link of ours, or the caller may no longer read the artifact),
        `link_expired`, `link_used`, or the token's own problem (revoked, expired)."""
        decoded = decode_link(link)
        record = None if decoded is None else await self._token(decoded[0].token_id)
        if (
            decoded is None
            or record is None
            or not mac_matches(link, decoded[1], record.secret_hash)
        ):
            raise Denied("not_found", "no such download link")
        claims = decoded[0]
        now = self._clock()
        if claims.expires_at <= now:
            raise Denied("link_expired", "this download link has expired: ask for a new one")
        caller = await self._checked(record)
        if caller.principal_id != claims.principal_id or not await self.may_read_artifact(
            caller, claims.artifact_id
        ):
            raise Denied("not_found", "no such artifact")
        # Single use: of any number of concurrent requests, exactly one claims the nonce.
        # Kept past the expiry, so a used link never counts as unused again.
        claimed = await self.store.begin(
            "download_link", claims.nonce, claims.artifact_id, now, ttl=2 * LINK_TTL
        )
        if not isinstance(claimed, New):
            raise Denied("link_used", "this download link was already used: ask for a new one")
        return caller, claims.artifact_id

    # -- workspaces, principals, memberships, tokens ----------------------------------------

    async def create_workspace(self, caller: Caller, name: str) -> WorkspaceRecord:
        """Any user may open a workspace, and owns it; agent principals may not."""
        if caller.kind != "user":
            raise Denied("insufficient_role", "an agent principal may not create workspaces")
        now = self._clock()
        workspace = WorkspaceRecord(workspace_id=new_id("wsp", now), name=name, created_at=now)
        await self.store.create_workspace(workspace)
        await self.store.set_membership(
            MembershipRecord(
                workspace_id=workspace.workspace_id,
                principal_id=caller.principal_id,
                role="owner",
                created_at=now,
            )
        )
        self.forget()
        return workspace

    def require_admin_somewhere(self, caller: Caller) -> None:
        """Users are server-wide: adding or listing them takes an admin of some workspace."""
        if not any(allows(role, "manage") for role in caller.roles.values()):
            raise Denied("insufficient_role", "only a workspace admin may manage users")

    async def create_user(self, caller: Caller, name: str) -> tuple[PrincipalRecord, str]:
        """`(user, token)`: a new person and their first token (to hand to them; shown
        this once). They see nothing until a workspace admin adds them as a member."""
        self.require_admin_somewhere(caller)
        now = self._clock()
        user = PrincipalRecord(
            principal_id=new_id("prn", now),
            kind="user",
            name=name,
            created_at=now,
            created_by=caller.principal_id,
        )
        await self.store.create_principal(user)
        token = await self._mint(user.principal_id, "first token", None)
        return user, token

    async def _roles(self, workspace_id: str) -> dict[str, Role]:
        members = await self.store.list_memberships(workspace_id=workspace_id)
        return {m.principal_id: m.role for m in members}

    async def list_users(self, caller: Caller) -> list[PrincipalRecord]:
        """The users an admin may see: members of the workspaces they administer, and the
        users they added (who may have no workspace yet). Nobody else's people."""
        self.require_admin_somewhere(caller)
        administered = [w for w, role in caller.roles.items() if allows(role, "manage")]
        visible: set[str] = set()
        for workspace_id in administered:
            visible |= set(await self._roles(workspace_id))
        users = await self.store.list_principals("user")
        return [
            u for u in users if u.principal_id in visible or u.created_by == caller.principal_id
        ]

    async def set_member(
        self, caller: Caller, workspace_id: str, principal_id: str, role: Role
    ) -> MembershipRecord:
        self.check(caller, workspace_id, "manage")
        if not may_assign(caller.role_in(workspace_id), role):
            raise Denied(
                "insufficient_role", f"a {caller.role_in(workspace_id)} may not grant {role}"
            )
        principal = await self.store.get_principal(principal_id)
        current = {
            m.principal_id: m.role
            for m in await self.store.list_memberships(workspace_id=workspace_id)
        }
        if current.get(principal_id) == "owner" and not allows(caller.role_in(workspace_id), "own"):
            raise Denied("insufficient_role", "only an owner may change an owner's role")
        membership = MembershipRecord(
            workspace_id=workspace_id,
            principal_id=principal.principal_id,
            role=role,
            created_at=self._clock(),
        )
        await self.store.set_membership(membership)
        self.forget()
        return membership

    async def remove_member(self, caller: Caller, workspace_id: str, principal_id: str) -> None:
        self.check(caller, workspace_id, "manage")
        current = {
            m.principal_id: m.role
            for m in await self.store.list_memberships(workspace_id=workspace_id)
        }
        if principal_id not in current:
            raise Denied("not_found", "that principal is not a member of this workspace")
        if current[principal_id] == "owner" and not allows(caller.role_in(workspace_id), "own"):
            raise Denied("insufficient_role", "only an owner may remove an owner")
        await self.store.remove_membership(workspace_id, principal_id)
        self.forget()

    async def create_agent(
        self, caller: Caller, workspace_id: str, name: str, role: Role
    ) -> PrincipalRecord:
        """An independent identity: its own role here, nothing of its creator's."""
        self.check(caller, workspace_id, "manage")
        if not may_assign(caller.role_in(workspace_id), role):
            raise Denied("insufficient_role", f"may not grant {role}")
        now = self._clock()
        agent = PrincipalRecord(
            principal_id=new_id("prn", now),
            kind="agent",
            name=name,
            workspace_id=workspace_id,
            created_by=caller.principal_id,
            created_at=now,
        )
        membership = MembershipRecord(
            workspace_id=workspace_id, principal_id=agent.principal_id, role=role, created_at=now
        )
        created = await self.store.create_principal(agent, memberships=[membership])
        self.forget()
        return created

    async def managed_agent(self, caller: Caller, principal_id: str) -> PrincipalRecord:
        """An agent principal the caller administers (its home workspace), else `Denied`."""
        try:
            agent = await self.store.get_principal(principal_id)
        except NotFound as exc:
            raise Denied("not_found", "no such principal") from exc
        if agent.kind != "agent":
            raise Denied("not_found", "no such agent principal")
        self.check(caller, agent.workspace_id, "manage")
        return agent

    async def disable_agent(self, caller: Caller, principal_id: str) -> PrincipalRecord:
        agent = await self.managed_agent(caller, principal_id)
        await self.store.disable_principal(agent.principal_id, self._clock())
        self.forget()
        return await self.store.get_principal(agent.principal_id)

    async def _token_owner(self, caller: Caller, principal_id: str | None) -> str:
        """Whose tokens a caller may handle: their own, or an agent principal's they admin."""
        if principal_id is None or principal_id == caller.principal_id:
            return caller.principal_id
        return (await self.managed_agent(caller, principal_id)).principal_id

    async def create_token(
        self,
        caller: Caller,
        *,
        principal_id: str | None = None,
        name: str | None = None,
        expires_in: float | None = None,
    ) -> tuple[TokenRecord, str]:
        """`(record, token)`: the token itself is returned this once and never again."""
        owner = await self._token_owner(caller, principal_id)
        token = await self._mint(owner, name, expires_in)
        return await self.store.get_token(_tokens.split(token)[0]), token

    async def _mint(self, principal_id: str, name: str | None, expires_in: float | None) -> str:
        now = self._clock()
        token_id = new_id("tok", now)
        token = _tokens.mint(token_id)
        record = TokenRecord(
            token_id=token_id,
            principal_id=principal_id,
            secret_hash=_tokens.secret_hash(_tokens.split(token)[1]),
            name=name,
            created_at=now,
            expires_at=None if expires_in is None else now + expires_in,
        )
        await self.store.create_token(record)
        return token

    async def list_tokens(
        self, caller: Caller, principal_id: str | None = None
    ) -> list[TokenRecord]:
        return await self.store.list_tokens(await self._token_owner(caller, principal_id))

    async def revoke_token(self, caller: Caller, token_id: str) -> TokenRecord:
        record = await self._token(token_id)
        if record is None:
            raise Denied("not_found", "no such token")
        if record.principal_id != caller.principal_id:
            try:
                await self._token_owner(caller, record.principal_id)
            except Denied as exc:
                # Another person's token is nobody else's business, not even its existence.
                raise Denied("not_found", "no such token") from exc
        await self.store.revoke_token(token_id, self._clock())
        self.forget()
        return await self.store.get_token(token_id)

    # -- the zero-setup default -------------------------------------------------------------

    async def bootstrap(self, local_token: str) -> WorkspaceRecord:
        """A fresh data directory gets one workspace and its owner, whose token is the
        local owner token; sessions from before workspaces existed move into it. Runs at
        every start; only the first one (of any process on one database) creates."""
        workspaces = await self.store.list_workspaces()
        if not workspaces:
            now = self._clock()
            workspace = WorkspaceRecord(
                workspace_id=new_id("wsp", now), name=DEFAULT_WORKSPACE, created_at=now
            )
            owner = PrincipalRecord(
                principal_id=new_id("prn", now), kind="user", name=DEFAULT_OWNER, created_at=now
            )
            try:
                await self.store.create_workspace(workspace)
            except WriteConflict:
                workspaces = await self.store.list_workspaces()
            else:
                await self.store.create_principal(
                    owner,
                    memberships=[
                        MembershipRecord(
                            workspace_id=workspace.workspace_id,
                            principal_id=owner.principal_id,
                            role="owner",
                            created_at=now,
                        )
                    ],
                )
                token_id, secret = _tokens.split(local_token)
                await self.store.create_token(
                    TokenRecord(
                        token_id=token_id,
                        principal_id=owner.principal_id,
                        secret_hash=_tokens.secret_hash(secret),
                        name="local owner token",
                        created_at=now,
                    )
                )
                workspaces = [workspace]
        default = workspaces[0]
        owners = [
            m
            for m in await self.store.list_memberships(workspace_id=default.workspace_id)
            if m.role == "owner"
        ]
        if owners:
            await self.store.adopt_orphans(default.workspace_id, owners[0].principal_id)
        self.forget()
        return default

    # -- execution grants -------------------------------------------------------------------

    def grant_for(
        self,
        caller: Caller,
        workspace_id: str,
        *,
        model: str | None,
    ) -> GrantRecord:
        """The grant an execution the caller starts will run under (its `execution_id`
        and the snapshot it pins are filled in when the Host accepts it). A user's grant is
        tied to the token they used; an agent principal's to the principal alone."""
        return GrantRecord(
            execution_id="",
            principal_id=caller.principal_id,
            workspace_id=workspace_id,
            token_id=caller.token_id if caller.kind == "user" else None,
            snapshot_digest=None,
            model=model,
            caps={},
            expires_at=self._clock() + self.grant_ttl,
        )

    async def grant_problem(
        self, execution_id: str, *, facts: GrantFacts | None = None
    ) -> str | None:
        """Why the execution may not go on (a `grant_problem` code), or None: the check at
        claim, renewal, resume and answer. `facts` are the grant's facts the caller read
        in this same request (the Host's answer reads them with the request and the
        execution, in one query); without them they are read from the store now. Never
        from a cache: a revocation by any process counts for the very next check."""
        if facts is None:
            facts = await self.store.grant_facts(execution_id)
        if facts is None:
            return None  # accepted before grants existed: it runs as the Host's owner did
        grant, principal, role, token = facts
        known: Role | None = role if role in ROLES else None
        return grant_problem(grant, principal, known, token, self._clock())

    async def renew_grant(self, execution_id: str) -> str | None:
        """Check the grant and, if it holds, move its expiry on; else revoke it for good
        (a later change cannot revive it) and return why."""
        problem = await self.grant_problem(execution_id)
        now = self._clock()
        if problem is None:
            await self.store.renew_grant(execution_id, now + self.grant_ttl)
        else:
            await self.store.revoke_grant(execution_id, now, problem)
        return problem


def _cookie_mac(key_hex: str, token_id: str, expires: str) -> str:
    key = hashlib.sha256(f"opennua-cookie\x1f{key_hex}".encode()).digest()
    return hmac.new(key, f"{token_id}.{expires}".encode(), hashlib.sha256).hexdigest()
