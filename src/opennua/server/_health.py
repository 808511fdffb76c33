"""Health, readiness, metrics, and the browser login that trades the token for a cookie."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from opennua.auth import Denied
from opennua.store import Unavailable

from ._authz import Anyone
from ._edge import Context
from ._guard import COOKIE_MAX_AGE, cookie_name, own_origin
from ._problems import problem_response

router = APIRouter(include_in_schema=False)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(ctx: Context) -> JSONResponse:
    # Ready means both: reads answer, and a write transaction can start and finish now
    # (a wedged SQLite writer answers reads but accepts nothing).
    store = ctx.store
    try:
        await asyncio.wait_for(store.list_session_summaries(limit=1), timeout=5)
    except Exception:
        return problem_response("unavailable", "the store does not answer")
    try:
        await store.check_writable()
    except Unavailable as exc:
        return problem_response("unavailable", f"the store cannot write: {exc}")
    return JSONResponse({"status": "ready"})


@router.get("/metrics")
async def prometheus(ctx: Context, auth: Anyone) -> Response:
    return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/login")
async def login(request: Request, ctx: Context, token: str = "") -> Response:
    # The one place a token travels in a query string: the link `nua serve` prints.
    # It is exchanged at once for a cookie and the browser is sent away from this URL.
    return await _login(request, ctx, token)


@router.post("/login")
async def login_form(request: Request, ctx: Context) -> Response:
    """The web UI's login form: a person pastes their own token (form-encoded)."""
    form = await request.form()
    token = form.get("token")
    return await _login(request, ctx, token if isinstance(token, str) else "")


async def _login(request: Request, ctx: Context, token: str) -> Response:
    if not _from_here(request):
        # Login CSRF: another site must not log a browser in here under a token of its
        # choosing (what the victim then does would happen in the attacker's account).
        return problem_response("forbidden", "a login must come from this server's own pages")
    try:
        cookie = await ctx.authority.issue_cookie(token.strip(), COOKIE_MAX_AGE)
    except Denied as exc:
        return problem_response(exc.code, "the login token is not valid")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        cookie_name(request.scope),
        cookie,
        max_age=COOKIE_MAX_AGE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _from_here(request: Request) -> bool:
    """A browser's login request from this origin, or a request no browser sent from
    another site: the form's POST carries our Origin; the link `nua serve` prints is
    opened from outside any site (`Sec-Fetch-Site: none`). Clients that send neither
    header are not browsers, which is whom login CSRF abuses."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == own_origin(request.scope, {"host": request.headers.get("host", "")})
    return request.headers.get("sec-fetch-site", "none") in ("none", "same-origin")


@router.api_route("/logout", methods=["GET", "POST"])
async def logout(request: Request) -> Response:
    """Forget this browser's login (the cookie); the token itself stays valid."""
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(
        cookie_name(request.scope),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response
