"""The desk's web application: the public form and page, the reviewer's desk, the delivery
webhook and the evidence MCP server, in one ASGI app (`create_app`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from opennua.client import GoneError, InvalidRequestError
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException

from feedback_desk.db import Database, now
from feedback_desk.dispatch import Runtime, answer, consume, dispatch, reconcile
from feedback_desk.evidence import build_server, guarded
from feedback_desk.hooks import problem, receive
from feedback_desk.intake import MAX_ATTACHMENTS, Refused, check_attachment, check_text

log = logging.getLogger("feedback_desk")
TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
COOKIE = "desk_login"


@dataclass
class DeskConfig:
    #: A SQLite file, or a `postgresql://` URL.
    db_path: Path | str
    runtime: Runtime | None = None
    #: How many dispatches background consumption keeps open at once.
    background_limit: int = 2
    #: Seconds between background consumption passes.
    background_interval: float = 1.0
    #: Seconds between reconciles from the API (one runs at start): deliveries are the
    #: normal path, this catches what a downtime lost.
    reconcile_interval: float = 60.0


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def create_app(config: DeskConfig) -> Desk:
    db = Database(config.db_path)
    mcp = build_server(db)
    mcp_app = mcp.streamable_http_app(stateless_http=True, json_response=True)
    api_key = str(db.setting("api_key"))
    wake = asyncio.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            task = asyncio.create_task(_background()) if config.runtime else None
            try:
                yield
            finally:
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                if config.runtime is not None:
                    await config.runtime.aclose()
                db.close()

    async def _background() -> None:
        """Reconcile at start (and each pass: a no-op when nothing is open), and, with
        the switch on, consume new tickets up to the limit."""
        assert config.runtime is not None
        last_reconcile = -float("inf")
        loop = asyncio.get_running_loop()
        while True:
            try:
                if loop.time() - last_reconcile >= config.reconcile_interval:
                    await reconcile(db, config.runtime)
                    last_reconcile = loop.time()
                if db.setting("background") == "on":
                    await consume(db, config.runtime, limit=config.background_limit)
            except Exception as exc:  # the runtime may be down: try again next pass
                log.warning("background pass failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), config.background_interval)
            wake.clear()

    app = FastAPI(title="Feedback desk", lifespan=lifespan)
    app.state.db = db
    app.state.api_key = api_key

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> Response:
        return problem(exc.status, exc.code, exc.detail)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        fields = ", ".join(".".join(map(str, e["loc"][1:])) for e in exc.errors())
        return problem(422, "invalid_request", f"missing or malformed: {fields}")

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        if exc.status_code in (302, 303):
            return RedirectResponse(str(exc.detail), status_code=303)
        code = {404: "not_found", 401: "unauthorized", 405: "method_not_allowed"}
        return problem(exc.status_code, code.get(exc.status_code, "error"), str(exc.detail))

    def reviewer(request: Request) -> str:
        who = db.logged_in(request.cookies.get(COOKIE))
        if who is None:
            if request.method == "GET":
                raise HTTPException(303, "/login")
            raise HTTPException(401, "log in as a reviewer")
        return who

    def ticket_or_404(ticket_id: str) -> dict[str, Any]:
        found = db.ticket(ticket_id)
        if found is None:
            raise HTTPException(404, f"no ticket {ticket_id}")
        return found

    # -- public -----------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    async def form(request: Request) -> Response:
        return TEMPLATES.TemplateResponse(request, "form.html", {"error": None})

    async def _files(files: list[UploadFile] | None) -> list[tuple[str, str, bytes]]:
        picked = [f for f in files or [] if f.filename]
        if len(picked) > MAX_ATTACHMENTS:
            raise Refused(413, "too_many_attachments", f"at most {MAX_ATTACHMENTS} attachments")
        checked = []
        for upload in picked:
            data = await upload.read()
            name, media_type = check_attachment(upload.filename or "", data)
            checked.append((name, media_type, data))
        return checked

    @app.post("/feedback")
    async def submit(request: Request) -> Response:
        async with request.form() as form:
            return await _submit(request, form)

    async def _submit(request: Request, form: FormData) -> Response:
        title, body = str(form.get("title", "")), str(form.get("body", ""))
        name, email = str(form.get("name", "")), str(form.get("email", ""))
        uploads = [f for f in form.getlist("attachment") if isinstance(f, UploadFile)]
        try:
            check_text(title, body)
            files = await _files(uploads)
        except Refused as refused:
            if wants_html(request):
                context = {"error": refused.detail}
                return TEMPLATES.TemplateResponse(
                    request, "form.html", context, status_code=refused.status
                )
            raise
        ticket = db.create_ticket(title, body, name, email)
        for filename, media_type, data in files:
            db.add_attachment(ticket["ticket_id"], 1, filename, media_type, data)
        wake.set()
        public = f"/t/{ticket['public_token']}"
        if wants_html(request):
            return RedirectResponse(public, status_code=303)
        return JSONResponse(
            {"ticket_id": ticket["ticket_id"], "revision": 1, "public_url": public},
            status_code=201,
        )

    @app.get("/t/{token}", response_class=HTMLResponse)
    async def public_page(request: Request, token: str) -> Response:
        ticket = db.ticket_by_token(token)
        if ticket is None:
            raise HTTPException(404, "no such ticket")
        replies = db.all(
            "SELECT * FROM replies WHERE ticket_id = ? ORDER BY revision", ticket["ticket_id"]
        )
        context = {
            "ticket": ticket,
            "messages": db.messages(ticket["ticket_id"]),
            "attachments": db.attachments(ticket["ticket_id"]),
            "replies": replies,
        }
        return TEMPLATES.TemplateResponse(request, "public.html", context)

    @app.post("/t/{token}/reply")
    async def follow_up(request: Request, token: str) -> Response:
        ticket = db.ticket_by_token(token)
        if ticket is None:
            raise HTTPException(404, "no such ticket")
        async with request.form() as form:
            text = str(form.get("body", ""))
            check_text("follow-up", text)
            uploads = [f for f in form.getlist("attachment") if isinstance(f, UploadFile)]
            files = await _files(uploads)
        revision = db.follow_up(ticket["ticket_id"], text)
        for filename, media_type, data in files:
            db.add_attachment(ticket["ticket_id"], revision, filename, media_type, data)
        wake.set()
        if wants_html(request):
            return RedirectResponse(f"/t/{token}", status_code=303)
        return JSONResponse({"ticket_id": ticket["ticket_id"], "revision": revision}, 201)

    # -- the reviewer's desk ---------------------------------------------------------------

    @app.get("/login", response_class=HTMLResponse)
    async def login_page(request: Request) -> Response:
        return TEMPLATES.TemplateResponse(request, "login.html", {"error": None})

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        username, password = str(form.get("username", "")), str(form.get("password", ""))
        if not db.check_password(username, password):
            context = {"error": "wrong user name or password"}
            return TEMPLATES.TemplateResponse(request, "login.html", context, status_code=401)
        response = RedirectResponse("/desk", status_code=303)
        response.set_cookie(COOKIE, db.login(username), httponly=True, samesite="lax")
        return response

    @app.get("/desk", response_class=HTMLResponse)
    async def desk(request: Request) -> Response:
        who = reviewer(request)
        rows = []
        for ticket in db.tickets():
            latest = db.dispatch(ticket["ticket_id"], ticket["revision"])
            rows.append({"ticket": ticket, "dispatch": latest})
        context = {
            "who": who,
            "rows": rows,
            "background": db.setting("background") == "on",
            "limit": config.background_limit,
        }
        return TEMPLATES.TemplateResponse(request, "desk.html", context)

    @app.post("/desk/settings")
    async def settings(request: Request) -> Response:
        reviewer(request)
        form = await request.form()
        db.set_setting("background", "on" if form.get("background") == "on" else "off")
        wake.set()
        return RedirectResponse("/desk", status_code=303)

    @app.get("/desk/{ticket_id}", response_class=HTMLResponse)
    async def review(request: Request, ticket_id: str) -> Response:
        who = reviewer(request)
        ticket = ticket_or_404(ticket_id)
        dispatches = db.dispatches(ticket_id)
        replies = {
            r["revision"]: r for r in db.all("SELECT * FROM replies WHERE ticket_id = ?", ticket_id)
        }
        links = {
            r["linked_id"]: r for r in db.all("SELECT * FROM links WHERE ticket_id = ?", ticket_id)
        }
        context = {
            "who": who,
            "ticket": ticket,
            "messages": db.messages(ticket_id),
            "attachments": db.attachments(ticket_id),
            "dispatches": dispatches,
            "replies": replies,
            "links": links,
            "undispatched": db.dispatch(ticket_id, ticket["revision"]) is None,
            "lost": request.query_params.get("lost"),
        }
        return TEMPLATES.TemplateResponse(request, "review.html", context)

    @app.post("/desk/{ticket_id}/dispatch")
    async def dispatch_route(request: Request, ticket_id: str) -> Response:
        reviewer(request)
        ticket_or_404(ticket_id)
        if config.runtime is None:
            return problem(503, "runtime_unconfigured", "the desk has no runtime configured")
        row = await dispatch(db, config.runtime, ticket_id)
        if wants_html(request):
            return RedirectResponse(f"/desk/{ticket_id}", status_code=303)
        return JSONResponse(_public_dispatch(row))

    @app.post("/desk/{ticket_id}/review")
    async def decide(request: Request, ticket_id: str) -> Response:
        """Save the edited draft and the link decisions; with `publish`, also publish the
        reply to the submitter's page — the only way anything reaches it."""
        who = reviewer(request)
        ticket_or_404(ticket_id)
        form = await request.form()
        raw = str(form.get("revision", ""))
        if not raw.isdigit():
            return problem(422, "invalid_request", "revision must be a number")
        revision = int(raw)
        row = db.dispatch(ticket_id, revision)
        if row is None or row["status"] != "draft ready":
            return problem(409, "no_draft", f"revision {revision} has no draft to review")
        reply = str(form.get("reply", "")).strip()
        decisions = {
            d["ticket_id"]: str(form.get(f"link:{d['ticket_id']}", "undecided"))
            for d in (row["output"] or {}).get("suspected_duplicates", [])
        }
        db.update_dispatch(ticket_id, revision, reply_edit=reply, link_decisions=decisions)
        for linked, decision in decisions.items():
            if decision == "accept":
                db.run(
                    "INSERT INTO links VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    ticket_id,
                    linked,
                    who,
                )
            elif decision == "reject":
                db.run("DELETE FROM links WHERE ticket_id = ? AND linked_id = ?", ticket_id, linked)
        if form.get("action") == "publish":
            if not reply:
                return problem(422, "empty_reply", "a published reply cannot be empty")
            db.run(
                "INSERT INTO replies VALUES (?, ?, ?, ?, ?) ON CONFLICT (ticket_id, revision)"
                " DO UPDATE SET body = excluded.body, published_by = excluded.published_by,"
                " published_at = excluded.published_at",
                ticket_id,
                revision,
                reply,
                who,
                now(),
            )
        if wants_html(request):
            return RedirectResponse(f"/desk/{ticket_id}", status_code=303)
        return JSONResponse({"saved": True, "published": form.get("action") == "publish"})

    @app.post("/desk/{ticket_id}/answer")
    async def answer_route(request: Request, ticket_id: str) -> Response:
        """Answer the agent's open question of a revision with one of the options it
        offers, or a free-form question (no options) with text. The first answer wins at
        the Host; a reviewer who lost is told who won."""
        who = reviewer(request)
        ticket_or_404(ticket_id)
        if config.runtime is None:
            return problem(503, "runtime_unconfigured", "the desk has no runtime configured")
        form = await request.form()
        raw, rid = str(form.get("revision", "")), str(form.get("request_id", ""))
        option_id = str(form.get("option_id", ""))
        row = db.dispatch(ticket_id, int(raw)) if raw.isdigit() else None
        asked = (row or {}).get("requests", {}).get(rid)
        if row is None or asked is None:
            return problem(404, "no_request", f"revision {raw} has no request {rid!r}")
        text = str(form.get("text", "")).strip()
        if not asked["options"] and not text:
            return problem(422, "empty_answer", "the question wants an answer in words")
        if asked["options"] and option_id not in {o["option_id"] for o in asked["options"]}:
            return problem(422, "invalid_option", f"{option_id!r} is not an option offered")
        given = {"option_id": option_id} if asked["options"] else {"text": text}
        try:
            done = await answer(db, config.runtime, row, rid, who, **given)
        except (InvalidRequestError, GoneError) as refused:
            # The runtime's word, passed on: words that do not fit the question's schema,
            # a request that expired or whose turn ended.
            return problem(refused.status, refused.code, refused.detail)
        if wants_html(request):
            lost = "" if done.won else "?lost=" + rid
            return RedirectResponse(f"/desk/{ticket_id}{lost}", status_code=303)
        if done.won:
            return JSONResponse({"won": True, "answered_by": done.answered_by})
        winner = answered_by(done.answered_by)
        detail = f"already answered by {winner}"
        return problem(409, "already_answered", detail, answered_by=done.answered_by)

    @app.post("/desk/reconcile")
    async def reconcile_route(request: Request) -> Response:
        reviewer(request)
        if config.runtime is None:
            return problem(503, "runtime_unconfigured", "the desk has no runtime configured")
        return JSONResponse({"changed": await reconcile(db, config.runtime)})

    @app.get("/desk/attachments/{attachment_id}")
    async def attachment(request: Request, attachment_id: str) -> Response:
        reviewer(request)
        found = db.one("SELECT * FROM attachments WHERE attachment_id = ?", attachment_id)
        if found is None:
            raise HTTPException(404, "no such attachment")
        disposition = f'attachment; filename="{found["filename"]}"'
        return Response(
            found["data"],
            media_type=found["media_type"],
            headers={"Content-Disposition": disposition, "X-Content-Type-Options": "nosniff"},
        )

    @app.get("/api/tickets/{ticket_id}")
    async def ticket_json(request: Request, ticket_id: str) -> Response:
        reviewer(request)
        ticket = ticket_or_404(ticket_id)
        return JSONResponse(
            {
                "ticket_id": ticket_id,
                "revision": ticket["revision"],
                "session_id": ticket["session_id"],
                "dispatches": [_public_dispatch(d) for d in db.dispatches(ticket_id)],
                "replies": db.all("SELECT * FROM replies WHERE ticket_id = ?", ticket_id),
            }
        )

    # -- results by delivery ---------------------------------------------------------------

    @app.post("/hooks/opennua")
    async def delivery(request: Request) -> Response:
        return receive(db, await request.body(), dict(request.headers))

    return Desk(app, db, guarded(mcp_app, api_key))


@dataclass
class Desk:
    """The desk as one ASGI app: `/mcp` is the evidence server (behind the API key), the
    rest the web application (whose lifespan runs the MCP session manager too)."""

    app: FastAPI
    db: Database
    evidence: Any

    @property
    def api_key(self) -> str:
        return str(self.app.state.api_key)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == "/mcp":
            await self.evidence(scope, receive, send)
            return
        await self.app(scope, receive, send)


def answered_by(by: dict[str, Any] | None) -> str:
    """Who answered, as the desk names them: the person, and the client they used."""
    if not by:
        return "nobody"
    person = by.get("on_behalf_of") or by.get("principal_id")
    return f"{person} ({by.get('client_id')})" if person else str(by.get("client_id"))


TEMPLATES.env.filters["answered_by"] = answered_by


def _public_dispatch(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("revision", "idempotency_key", "session_id", "turn_id", "execution_id", "status",
            "context", "output", "error", "plugin", "reply_edit", "link_decisions",
            "requests")  # fmt: skip
    return {k: row[k] for k in keys}
