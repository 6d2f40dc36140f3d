"""The console's session: a signed cookie, who it signs in as, and the CSRF check of every form.

The cookie holds the pasted API key (verified on every request, so a revoked key ends the session at once), the
user the session acts for (an admin key or AUTH_MODE=none picks one) and the session's CSRF token. It is signed
with HMAC-SHA256 under UI_SESSION_SECRET (a per-process random secret when unset: sessions end at a restart),
HttpOnly, SameSite=Strict, Secure when the request came over https, and it expires after UI_SESSION_HOURS. The key is
never rendered into a page. docs/console.md has the rules.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, replace
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Depends, HTTPException, Request
from starlette.responses import Response

from service.core.auth import ApiKeyStore, Caller, rate_limit
from service.core.errors import Unauthorized
from service.deps import Deps

COOKIE = "memory_console"
LOGIN_PATH = "/ui/login"
MAX_FORM_BYTES = 256 * 1024


@dataclass(frozen=True)
class SessionData:
    csrf: str
    key: str | None = None  # the API key pasted at sign-in (AUTH_MODE=keys)
    user: str | None = None  # the user the session acts for (admin key or AUTH_MODE=none)
    issued: int = 0


class SessionCodec:
    """Sign and read the cookie's value: base64url(JSON) '.' base64url(HMAC-SHA256)."""

    def __init__(self, secret: bytes, max_age_s: int) -> None:
        self._secret = secret
        self.max_age_s = max_age_s

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()

    def dumps(self, data: SessionData) -> str:
        payload = base64.urlsafe_b64encode(json.dumps(
            {"c": data.csrf, "k": data.key, "u": data.user, "t": data.issued}, separators=(",", ":")).encode())
        return (payload + b"." + base64.urlsafe_b64encode(self._sign(payload))).decode()

    def loads(self, value: str | None) -> SessionData | None:
        """The session of a cookie value; None when it is missing, forged, malformed or expired."""
        if not value or len(value) > 4096 or "." not in value:
            return None
        payload, _, sig = value.encode().partition(b".")
        try:
            if not hmac.compare_digest(base64.urlsafe_b64decode(sig), self._sign(payload)):
                return None
            raw: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload))
        except ValueError:
            return None
        issued = int(raw.get("t") or 0)
        if time.time() - issued > self.max_age_s or not isinstance(raw.get("c"), str):
            return None
        return SessionData(csrf=raw["c"], key=raw.get("k"), user=raw.get("u"), issued=issued)


def new_session(**fields: Any) -> SessionData:
    return SessionData(csrf=secrets.token_urlsafe(24), issued=int(time.time()), **fields)


def codec_of(request: Request) -> SessionCodec:
    codec: SessionCodec = request.app.state.console_codec
    return codec


def read_session(request: Request) -> SessionData | None:
    return codec_of(request).loads(request.cookies.get(COOKIE))


def set_session(request: Request, response: Response, data: SessionData) -> None:
    codec = codec_of(request)
    response.set_cookie(COOKIE, codec.dumps(data), max_age=codec.max_age_s, path="/ui", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def clear_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")


def to_sign_in(request: Request) -> HTTPException:
    """Back to the sign-in page (htmx follows HX-Redirect; a page load follows Location)."""
    return HTTPException(status_code=303, headers={"Location": LOGIN_PATH, "HX-Redirect": LOGIN_PATH})


async def form_of(request: Request) -> dict[str, str]:
    """The request's urlencoded form (the console posts nothing else), read once and kept on the request."""
    cached = getattr(request.state, "console_form", None)
    if isinstance(cached, dict):
        return cached
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(status_code=413, detail="form too large")
    fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    request.state.console_form = fields
    return fields


async def check_csrf(request: Request, session: SessionData | None) -> None:
    """Every state-changing request carries the session's token (a form field or the X-CSRF-Token header)."""
    sent = request.headers.get("x-csrf-token") or (await form_of(request)).get("csrf", "")
    if session is None or not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise HTTPException(status_code=403, detail="missing or wrong CSRF token: reload the page and try again")


@dataclass(frozen=True)
class Console:
    """A signed-in request: the stack, the caller its key makes, the user it acts for, its session."""

    deps: Deps
    caller: Caller
    user: str | None  # None: an admin or AUTH_MODE=none session that has not picked a user yet
    session: SessionData

    @property
    def admin(self) -> bool:
        return self.caller.admin or (self.caller.anonymous and self.deps.settings.resolved_auth_mode == "none")

    @property
    def can_switch(self) -> bool:
        return self.caller.admin or self.caller.anonymous

    def acting(self) -> str:
        """The tenant every call of this request is made for (the same rule as the API's `Caller.user`)."""
        if self.user is None:
            raise HTTPException(status_code=303, headers={"Location": "/ui/user", "HX-Redirect": "/ui/user"})
        return self.caller.user(self.user)

    def with_user(self, user: str) -> SessionData:
        return replace(self.session, user=user)


async def console(request: Request) -> Console:
    """The signed-in console of this request, or a redirect to the sign-in page; forms are checked for CSRF."""
    deps: Deps = request.app.state.deps
    session = read_session(request)
    if session is None:
        raise to_sign_in(request)
    if session.key:
        try:
            record = await ApiKeyStore(deps.redis, deps.settings.redis).verify(session.key)
        except Unauthorized as exc:  # revoked or unknown since sign-in
            raise to_sign_in(request) from exc
        caller = Caller(key_id=record.key_id, key_user=record.user_id, admin=record.admin)
        user = session.user if record.admin else record.user_id
    elif deps.settings.resolved_auth_mode == "none":
        caller, user = Caller(), session.user
    else:
        raise to_sign_in(request)
    await rate_limit(deps, request.app.state.rate_limiter, caller, request.method, request.url.path,
                     request.client.host if request.client else None)
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        await check_csrf(request, session)
    request.state.caller = caller
    return Console(deps, caller, user, session)


ConsoleDep = Annotated[Console, Depends(console)]
