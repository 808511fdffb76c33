"""The one place a server asks "who is this?" and "may they?", over the store's facts.

`Authority` authenticates tokens and cookies, answers for an object's workspace and keeps
execution grants; it also manages workspaces, principals, memberships and tokens (`_people`,
mixed in). The policy itself is `_policy` (pure); this module is the I/O around it.

Lookups are cached for `cache_seconds` (default 1 s) so that a request does not pay for
three store reads; every change made through this Authority drops the cache at once, and
so does the store's wake-up for a change made by any process (`Store.watch_rights`: the
server calls `forget`), so the next request on any host is judged by the change; without
that wake-up (a lost notification) a change is still seen within `cache_seconds`. Where
an object lives is cached for as long as it lives: an object never moves to another
workspace (a session from before workspaces joins the default one once, and is not cached
until it has). Execution grants are never cached: `grant_problem` judges the facts as
read in the same request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from opennua.store import GrantFacts, GrantRecord, New, NotFound, TokenRecord

from . import _tokens
from ._links import (
    LINK_TTL,
    LinkClaims,
    cookie_mac,
    decode_link,
    derive_key,
    encode_link,
    mac_matches,
)
from ._people import AuthorityStore, People
from ._policy import (
    ROLES,
    Caller,
    Denied,
    Permission,
    Role,
    allows,
    grant_problem,
    token_problem,
)

T = TypeVar("T")
Clock = Callable[[], float]
#: A grant lasts this long unless renewed with the lease.
GRANT_TTL = 300.0


class Authority(People):
    def __init__(
        self,
        store: AuthorityStore,
        *,
        clock: Clock = time.time,
        cache_seconds: float = 1.0,
        grant_ttl: float = GRANT_TTL,
        secret_key: bytes | None = None,
    ) -> None:
        """`secret_key`: the server's secret (`secret.key` / `NUA_SECRET_KEY`), which login
        cookies and download links are MACed with; None: a random key of this process's
        own (its cookies and links open nothing on another process, or after a restart)."""
        self.store = store
        self._clock = clock
        self._cache_seconds = cache_seconds
        self.grant_ttl = grant_ttl
        server_key = secret_key if secret_key is not None else secrets.token_bytes(32)
        self._cookie_key = derive_key(server_key, "login cookie")
        self._link_key = derive_key(server_key, "download link")
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
            # A workspace that revoked this token is one the token no longer opens.
            memberships = await self.store.list_memberships(
                principal_id=principal.principal_id, opened_by=token.token_id
            )
            return Caller(
                principal_id=principal.principal_id,
                kind=principal.kind,
                name=principal.name,
                token_id=token.token_id,
                roles={m.workspace_id: m.role for m in memberships},
                server_admin=principal.kind == "user" and principal.admin_since is not None,
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
        """`<token id>.<expiry>.<mac>` for a valid token, MACed with a key derived from the
        server's secret key (which neither a client nor a reader of the database sees):
        the cookie is not the token, and an edited or forged one opens nothing. Revoking
        the token ends the cookie too: every request checks the token again."""
        await self.authenticate(token)
        token_id, _ = _tokens.split(token)
        expires = str(int(self._clock()) + max_age)
        return f"{token_id}.{expires}.{cookie_mac(self._cookie_key, token_id, expires)}"

    async def authenticate_cookie(self, value: str) -> Caller:
        token_id, _, rest = value.partition(".")
        expires, _, mac = rest.partition(".")
        if not (expires.isascii() and expires.isdigit() and len(expires) <= 12) or (
            not hmac.compare_digest(
                mac.encode(), cookie_mac(self._cookie_key, token_id, expires).encode()
            )
        ):
            raise Denied("unauthorized", "the login cookie is not valid")
        if int(expires) <= self._clock():
            raise Denied("unauthorized", "the login has expired: log in again")
        record = await self._token(token_id)
        if record is None:
            raise Denied("unauthorized", "the login cookie is not valid")
        return await self._checked(record)

    async def recheck(
        self, caller: Caller, workspace_id: str | None, permission: Permission = "read"
    ) -> tuple[Caller | None, Denied | None]:
        """The caller as their token stands for them now, or why it no longer may
        `permission` in `workspace_id`: what an open stream asks after a revocation (the
        wake-up that reported it emptied the cache, so this reads the change)."""
        record = await self._token(caller.token_id)
        if record is None:
            return None, Denied("unauthorized", "the token no longer exists")
        try:
            current = await self._checked(record)
            self.check(current, workspace_id, permission)
        except Denied as denied:
            return None, denied
        return current, None

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

    async def subscription_workspace(self, subscription_id: str) -> str | None:
        async def load() -> str | None:
            return (await self.store.get_subscription(subscription_id)).workspace_id

        return await self._placed("subscription", subscription_id, load)

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
        return encode_link(claims, self._link_key), float(expires)

    async def redeem_download_link(self, link: str) -> tuple[Caller, str]:
        """The caller and artifact a link opens, re-authorized now and spent: `Denied`
        `not_found` (not a link of ours, or the caller may no longer read the artifact),
        `link_expired`, `link_used`, or the token's own problem (revoked, expired)."""
        decoded = decode_link(link)
        if decoded is None or not mac_matches(link, decoded[1], self._link_key):
            raise Denied("not_found", "no such download link")
        record = await self._token(decoded[0].token_id)
        if record is None:
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
