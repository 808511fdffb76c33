"""The HTTP side of the client: reads, and intents that are safe to retransmit.

Every intent carries an `intent_id` that is also its `Idempotency-Key`. When a request
times out or the connection drops, its outcome is unknown, so the client sends the very
same intent again with the same key: the Host either performs it once or replays the
stored result. A new decision (a retry of a turn, a second message) always gets a new key.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlencode

import httpx

from opennua.protocol import (
    Accepted,
    AnswerInput,
    Cancel,
    ReportDelivery,
    RetryTurn,
    SendMessage,
    SessionState,
    UpdateSession,
    new_id,
)

from ._api import segment
from ._automation import AutomationApi
from ._backoff import Backoff
from ._errors import (
    ApiError,
    ConflictError,
    IntegrityError,
    ServerError,
    UnreachableError,
    error_from_response,
)
from ._local import LocalSession
from ._people import PeopleApi
from ._subscription import Subscription
from .responses import (
    ArtifactDoc,
    ArtifactStateDoc,
    DeploymentDoc,
    DownloadLinkDoc,
    ExecutionDoc,
    MoveDoc,
    PluginDoc,
    PluginSummary,
    PublishedVersion,
    Resolution,
    SessionItem,
    VersionDoc,
)

DEFAULT_URL = "http://127.0.0.1:7421"
Sleep = Callable[[float], Awaitable[None]]

#: Transport failures after which a request's outcome is unknown (or it never left).
RETRYABLE = (httpx.TransportError,)
#: Transport failures before the request left: it surely did not arrive.
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
#: Server answers that say "not now" rather than "never": a retry may succeed.
TRANSIENT_STATUS = frozenset({502, 503, 504})


def new_client_id() -> str:
    return new_id("client", ms=int(time.time() * 1000), entropy=os.urandom(10))


def new_intent_id() -> str:
    return new_id("intent", ms=int(time.time() * 1000), entropy=os.urandom(10))


@dataclass(frozen=True)
class SessionPage:
    items: list[SessionItem]
    next_cursor: str | None


class Client(PeopleApi, AutomationApi):
    """A client for the server at `url`; use it as `async with connect(url, token) as c:`.

    No request is made until the first call. `client_id` names this client in the actions
    its intents cause (`answered_by`, triggers); it is stable for the client's lifetime.
    `intent_timeout` bounds how long an intent is retransmitted before UnreachableError.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        client_id: str | None = None,
        timeout: float = 10.0,
        intent_timeout: float = 30.0,
        backoff: Backoff | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.client_id = client_id or new_client_id()
        self.intent_timeout = intent_timeout
        self.backoff = backoff or Backoff()
        self.sleep = sleep
        #: Whether the server ever answered this client: until it has, a connection it
        #: refuses means nobody listens there, not a server restarting.
        self.answered = False
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- plumbing ------------------------------------------------------------------------

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; transport failures become UnreachableError, non-2xx a typed error."""
        try:
            response = await self.http.request(method, path, **kwargs)
        except RETRYABLE as exc:
            raise UnreachableError(self.url, _reason(exc)) from exc
        self.answered = True
        if response.status_code >= 400:
            raise error_from_response(response)
        return response

    async def send_intent(
        self, method: str, path: str, body: dict[str, Any], intent_id: str
    ) -> dict[str, Any]:
        """Send until the Host answers, retransmitting the same key after unknown outcomes.

        Retried, only what a later copy can get through: transport failures (the
        request may or may not have arrived; a reset while the server restarts), 409
        `request_in_flight` (the first copy is still running) and 502/503/504 (the store
        or the server behind a proxy briefly unavailable). A connection refused before
        the server ever answered this client is final at once: nobody listens there
        (`nua run` with no server failed after 34 s of retries). Everything else is final.
        """
        deadline = time.monotonic() + self.intent_timeout
        headers = {"Idempotency-Key": intent_id}
        attempt = 0
        while True:
            try:
                result: dict[str, Any] = (
                    await self.request(method, path, json=body, headers=headers)
                ).json()
                return result
            except UnreachableError as exc:
                never_sent = isinstance(exc.__cause__, NEVER_SENT)
                if time.monotonic() >= deadline or (never_sent and not self.answered):
                    raise
            except ConflictError as exc:
                if exc.code != "request_in_flight" or time.monotonic() >= deadline:
                    raise
            except ServerError as exc:
                if exc.status not in TRANSIENT_STATUS or time.monotonic() >= deadline:
                    raise
            await self.sleep(self.backoff.delay(attempt))
            attempt += 1

    # -- reads ---------------------------------------------------------------------------

    async def health(self) -> bool:
        try:
            return (await self.http.get("/healthz")).status_code == 200
        except RETRYABLE:
            return False

    async def list_sessions(self, limit: int = 50, cursor: str | None = None) -> SessionPage:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        body = await self._get("/v1/sessions", **params)
        return SessionPage(body["items"], body.get("next_cursor"))

    async def iter_sessions(self, page_size: int = 100) -> AsyncGenerator[SessionItem, None]:
        cursor: str | None = None
        while True:
            page = await self.list_sessions(page_size, cursor)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def execution(self, execution_id: str) -> ExecutionDoc:
        """The Supervisor's record: status, epoch, attempts, deadline."""
        result: ExecutionDoc = await self._get(f"/v1/executions/{segment(execution_id)}")
        return result

    async def artifact(self, artifact_id: str) -> ArtifactDoc:
        result: ArtifactDoc = await self._get(f"/v1/artifacts/{segment(artifact_id)}")
        return result

    async def save_artifact(self, artifact_id: str, dest: Path) -> ArtifactDoc:
        """Download to `dest`, verifying size and sha256 before the file appears there.

        Returns the artifact's metadata. On a mismatch nothing is written and
        IntegrityError is raised.
        """
        meta = await self.artifact(artifact_id)
        digest = hashlib.sha256()
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        try:
            with tmp.open("wb") as out:
                async with self.http.stream(
                    "GET", f"/v1/artifacts/{segment(artifact_id)}/content"
                ) as r:
                    if r.status_code >= 400:
                        await r.aread()
                        raise error_from_response(r)
                    async for chunk in r.aiter_bytes():
                        digest.update(chunk)
                        out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            actual = digest.hexdigest()
            if actual != meta["sha256"]:
                raise IntegrityError(artifact_id, meta["sha256"], actual)
            tmp.replace(dest)
        except RETRYABLE as exc:
            raise UnreachableError(self.url, _reason(exc)) from exc
        finally:
            tmp.unlink(missing_ok=True)
        return meta

    async def download_link(self, artifact_id: str) -> tuple[str, str]:
        """`(url, expires_at)`: a single-use link to the artifact for a browser or a chat
        client, bound to this client's principal and opened without a token."""
        body = await self._mint_link(artifact_id)
        return str(self.http.base_url).rstrip("/") + body["url"], body["expires_at"]

    async def read_artifact_by_link(self, artifact_id: str) -> tuple[ArtifactDoc, bytes]:
        """Like `read_artifact`, through a single-use link (what a bridge hands on)."""
        meta = await self.artifact(artifact_id)
        link = await self._mint_link(artifact_id)
        data = (await self.request("GET", link["url"])).content
        actual = hashlib.sha256(data).hexdigest()
        if actual != meta["sha256"]:
            raise IntegrityError(artifact_id, meta["sha256"], actual)
        return meta, data

    async def _mint_link(self, artifact_id: str) -> DownloadLinkDoc:
        response = await self.request("POST", f"/v1/artifacts/{segment(artifact_id)}/links")
        body: DownloadLinkDoc = response.json()
        return body

    async def read_artifact(self, artifact_id: str) -> tuple[ArtifactDoc, bytes]:
        """Metadata and verified bytes of a (small) artifact."""
        meta = await self.artifact(artifact_id)
        data = (await self.request("GET", f"/v1/artifacts/{segment(artifact_id)}/content")).content
        actual = hashlib.sha256(data).hexdigest()
        if actual != meta["sha256"]:
            raise IntegrityError(artifact_id, meta["sha256"], actual)
        return meta, data

    # -- sessions ------------------------------------------------------------------------

    async def create_session(
        self,
        title: str = "",
        metadata: dict[str, Any] | None = None,
        *,
        intent_id: str | None = None,
        deployment: str | None = None,
        workspace_id: str | None = None,
    ) -> SessionClient:
        """A new session, in `workspace_id` (default: the caller's first workspace)."""
        intent_id = intent_id or new_intent_id()
        body = {
            "title": title,
            "metadata": metadata or {},
            "client_id": self.client_id,
            "intent_id": intent_id,
        }
        if deployment is not None:
            body["deployment"] = deployment
        path = "/v1/sessions"
        if workspace_id is not None:
            path += "?" + urlencode({"workspace_id": workspace_id})
        created = await self.send_intent("POST", path, body, intent_id)
        return self.session(created["session_id"])

    def session(self, session_id: str) -> SessionClient:
        return SessionClient(self, session_id)

    # -- plugins and deployments -----------------------------------------------------------

    async def publish_plugin(
        self,
        files: Mapping[str, tuple[bytes, bool]],
        *,
        visibility: str = "workspace",
        workspace_id: str | None = None,
        name: str | None = None,
        version: str | None = None,
    ) -> PublishedVersion:
        """Publish a plugin from ``{path: (content, executable)}`` into ``workspace_id``
        (default: your first), seen by the workspace or (``private``) by you only: upload
        only the contents the server lacks, then the listing. ``name`` and ``version``:
        for a plugin whose manifest does not say them. Returns the version and whether it
        was new (``created``)."""
        where = {} if workspace_id is None else {"workspace_id": workspace_id}
        by_sha = {hashlib.sha256(data).hexdigest(): data for data, _ in files.values()}
        missing = await self.request(
            "POST", "/v1/plugin-files/missing", json={"sha256": sorted(by_sha)}, params=where
        )
        octets = {"Content-Type": "application/octet-stream"}
        for sha in missing.json()["missing"]:
            await self.request(
                "POST", "/v1/plugin-files", content=by_sha[sha], headers=octets, params=where
            )
        listing = {
            path: {
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "executable": executable,
            }
            for path, (data, executable) in sorted(files.items())
        }
        response = await self.request(
            "POST",
            "/v1/plugins",
            json={"files": listing, "visibility": visibility}
            | {k: v for k, v in (("name", name), ("version", version)) if v is not None},
            params=where,
        )
        published: VersionDoc = response.json()
        return PublishedVersion(**published, created=response.status_code == 201)

    async def plugins(self) -> list[PluginSummary]:
        items: list[PluginSummary] = (await self._get("/v1/plugins"))["items"]
        return items

    async def plugin(self, name: str) -> PluginDoc:
        found: PluginDoc = await self._get(f"/v1/plugins/{segment(name)}")
        return found

    async def plugin_version(self, name: str, version: str) -> VersionDoc:
        found: VersionDoc = await self._get(
            f"/v1/plugins/{segment(name)}/versions/{segment(version)}"
        )
        return found

    async def release(self, name: str, channel: str, version: str) -> MoveDoc:
        path = f"/v1/plugins/{segment(name)}/channels/{segment(channel)}/release"
        moved: MoveDoc = (await self.request("POST", path, json={"version": version})).json()
        return moved

    async def rollback(self, name: str, channel: str) -> MoveDoc:
        path = f"/v1/plugins/{segment(name)}/channels/{segment(channel)}/rollback"
        moved: MoveDoc = (await self.request("POST", path)).json()
        return moved

    async def deploy(
        self, name: str, spec: dict[str, Any], *, workspace_id: str | None = None
    ) -> DeploymentDoc:
        """Save a deployment in ``workspace_id`` (default: your first)."""
        where = {} if workspace_id is None else {"workspace_id": workspace_id}
        saved = await self.request(
            "PUT", f"/v1/deployments/{segment(name)}", json=spec, params=where
        )
        doc: DeploymentDoc = saved.json()
        return doc

    async def deployments(self) -> list[DeploymentDoc]:
        items: list[DeploymentDoc] = (await self._get("/v1/deployments"))["items"]
        return items

    async def deployment(self, name: str) -> DeploymentDoc:
        doc: DeploymentDoc = await self._get(f"/v1/deployments/{segment(name)}")
        return doc


class SessionClient:
    """One session: reads, intents, and live subscriptions sharing one LocalSession."""

    def __init__(self, client: Client, session_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self.local = LocalSession()
        self.path = f"/v1/sessions/{segment(session_id)}"  # this session's URL path

    async def snapshot(self) -> tuple[int, SessionState]:
        """`(seq, canonical state)` as the Host has it now."""
        body = await self.client._get(self.path)
        state: SessionState = body["state"]
        return int(body["seq"]), state

    async def history(
        self, after: int = 0, page_size: int = 1000
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Every action with seq > `after`, in order, as the Host stored it (raw JSON)."""
        while True:
            page = await self.client._get(f"{self.path}/actions", after=after, limit=page_size)
            for action in page["actions"]:
                yield action
            if not page["actions"] or not page.get("more"):
                return
            after = page["next_after"]

    def subscribe(
        self,
        after: int | None = None,
        *,
        replay_gaps: bool = False,
        heartbeat_timeout: float = 45.0,
    ) -> Subscription:
        """A live view of this session kept in `self.local` (see `Subscription`)."""
        return Subscription(
            self, after, replay_gaps=replay_gaps, heartbeat_timeout=heartbeat_timeout
        )

    async def file_diff(self, change_id: str) -> str:
        """The whole unified diff of a file change (also one stored by reference)."""
        response = await self.client.request(
            "GET", f"{self.path}/file-changes/{segment(change_id)}/diff"
        )
        return response.text

    async def retry_artifact(self, artifact_id: str) -> ArtifactStateDoc:
        """Upload again an artifact whose upload failed: `{artifact_id, state, error}`."""
        response = await self.client.request(
            "POST", f"{self.path}/artifacts/{segment(artifact_id)}/retry"
        )
        result: ArtifactStateDoc = response.json()
        return result

    # -- intents -------------------------------------------------------------------------

    async def send_message(
        self,
        content: str | list[dict[str, Any]],
        *,
        if_busy: Literal["reject", "enqueue", "interrupt"] = "enqueue",
        intent_id: str | None = None,
        client_tools: list[dict[str, Any]] | None = None,
    ) -> Accepted:
        """Start a turn. Shown at once in `local.pending` (the optimistic overlay) until
        its `turn.started` arrives; rolled back there if the Host rejects it.

        `client_tools` (`{name, description, parameters}`) are tools this client runs
        itself: a call of one waits as an input request, answered with the tool's result
        (`answer(request_id, payload=result)`; docs/protocol.md)."""
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        intent = SendMessage(
            intent_id=intent_id or new_intent_id(),
            client_id=self.client.client_id,
            content=parts,
            if_busy=if_busy,
            client_tools=client_tools or [],
        )
        self.local.propose(intent.intent_id, parts)
        try:
            ids = await self._send(intent, f"{self.path}/messages")
        except (ApiError, UnreachableError) as exc:
            code = exc.code if isinstance(exc, ApiError) else "unreachable"
            self.local.reject(intent.intent_id, code, str(exc))
            raise
        self.local.accept(intent.intent_id, ids.get("turn_id"))
        return Accepted(intent_id=intent.intent_id, ids=_strings(ids))

    async def cancel(self, turn_id: str | None = None, *, intent_id: str | None = None) -> Accepted:
        intent = Cancel(
            intent_id=intent_id or new_intent_id(),
            client_id=self.client.client_id,
            turn_id=turn_id,
        )
        ids = await self._send(intent, f"{self.path}/cancel")
        return Accepted(intent_id=intent.intent_id, ids=_strings(ids))

    async def retry(self, turn_id: str, *, intent_id: str | None = None) -> Accepted:
        """An explicit new decision: a new execution with `retry_of` (never a retransmission)."""
        intent = RetryTurn(
            intent_id=intent_id or new_intent_id(),
            client_id=self.client.client_id,
            turn_id=turn_id,
        )
        ids = await self._send(
            intent, f"{self.path}/turns/{segment(turn_id)}/retry", exclude={"turn_id"}
        )
        return Accepted(intent_id=intent.intent_id, ids=_strings(ids))

    async def answer(
        self,
        request_id: str,
        *,
        option_id: str | None = None,
        payload: Any = None,
        intent_id: str | None = None,
        on_behalf_of: str | None = None,
    ) -> Resolution:
        """Answer an input request; returns the resolution. If another answer won,
        ConflictError carries its `resolution` and `answered_by`. `on_behalf_of`: the
        person this client answers for (a chat bridge: the chat user), shown to all."""
        intent = AnswerInput(
            intent_id=intent_id or new_intent_id(),
            client_id=self.client.client_id,
            request_id=request_id,
            option_id=option_id,
            payload=payload,
            on_behalf_of=on_behalf_of,
        )
        path = f"{self.path}/input-requests/{segment(request_id)}/answer"
        body = await self._send(intent, path, exclude={"request_id"})
        return cast(Resolution, body.get("resolution") or {})

    async def report_delivery(self, report: ReportDelivery) -> None:
        """Tell the Host how an external delivery fared (a bridge's report).

        ConflictError (`delivery_closed`) when the delivery already reached sent or failed.
        """
        path = f"{self.path}/deliveries/{segment(report.delivery_id)}"
        await self._send(report, path, exclude={"delivery_id"})

    async def update(self, title: str, *, intent_id: str | None = None) -> None:
        intent = UpdateSession(
            intent_id=intent_id or new_intent_id(), client_id=self.client.client_id, title=title
        )
        await self._send(intent, self.path, method="PATCH")

    async def _send(
        self,
        intent: SendMessage | Cancel | AnswerInput | RetryTurn | UpdateSession | ReportDelivery,
        path: str,
        *,
        exclude: set[str] | None = None,
        method: str = "POST",
    ) -> dict[str, Any]:
        # The body is the protocol's intent object itself, minus what the path carries.
        body = intent.model_dump(mode="json", exclude={"type", *(exclude or set())})
        return await self.client.send_intent(method, path, body, intent.intent_id)


def _strings(ids: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in ids.items() if v is not None}


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


#: The name the documentation opens with: `async with connect(url, token) as client:`.
connect = Client
