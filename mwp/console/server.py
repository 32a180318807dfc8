"""The Approval console's HTTP server (aiohttp): one page, its script, and a JSON API.

``mwp dev`` serves it on ``--console-port``; ``mwp console`` runs it on its own, beside an
authority worker (:mod:`mwp.cli.console`). It lives in the authority zone: it reads Mission
and WorkItem views through the client SDK and Artifacts from the store, and forwards the
decisions humans sign in their browsers. It holds no private key.

Requests that change something carry the ``X-MWP-Console`` header (a cross-site form cannot
set it) and the session cookie is ``HttpOnly`` and ``SameSite=Strict``. An Artifact is served
under a sandboxing Content Security Policy, so content a producer chose never runs as the
console. Errors are the MWP error object (``error.schema.json``) under ``error``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final

from aiohttp import web

from mwp.client import MwpClient
from mwp.console import decisions, reading
from mwp.console.login import Login, Logins
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.registry import Principal
from mwp.core.wire.values import format_utc
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import ObjectStore

Json = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

COOKIE: Final = "mwp_console"
HEADER: Final = "X-MWP-Console"
PAGE_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
ARTIFACT_POLICY: Final = "sandbox; default-src 'none'; img-src 'self' data:"
STATIC: Final = {
    "/": ("index.html", "text/html"),
    "/console.js": ("console.js", "text/javascript"),
    "/console.css": ("console.css", "text/css"),
}
_STATUS: Final = {
    ErrorCode.AUTH_REQUIRED: 401,
    ErrorCode.AUTH_INVALID_SIGNATURE: 403,
    ErrorCode.AUTH_FORBIDDEN: 403,
    ErrorCode.GROUP_NOT_FOUND: 404,
    ErrorCode.INVALID_COMMAND: 400,
    ErrorCode.SCHEMA_VALIDATION_FAILED: 400,
    ErrorCode.INTERNAL_ERROR: 500,
    ErrorCode.BACKPRESSURE: 503,
}


def _now() -> datetime:
    return datetime.now(UTC)


def _failure(error: MwpError) -> web.Response:
    wire = error.to_wire(format_utc(_now()))
    return web.json_response({"error": wire}, status=_STATUS.get(error.code, 409))


class Console:
    """The console of one Organization (``organization()`` is its ID, or None before
    ``mwp registry init``), reading Artifacts from ``store``."""

    def __init__(
        self,
        client: MwpClient,
        organization: Callable[[], str | None],
        store: ObjectStore,
        *,
        origin: str = "",
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.client = client
        self.organization = organization
        self.artifacts = ArtifactStore(store)
        self.logins = Logins(origin)
        self.clock = clock
        self.decided = 0  # decisions forwarded and accepted (a figure for the operator)
        self.closed = reading.ClosedViews()  # closed Missions' final views, queried once

    # --- the app ---------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=256 * 1024)
        for path in STATIC:
            app.router.add_get(path, self._static)
        app.router.add_post("/api/login/challenge", self._challenge)
        app.router.add_post("/api/login", self._login)
        app.router.add_post("/api/logout", self._logout)
        app.router.add_get("/api/me", self._me)
        app.router.add_get("/api/missions", self._missions)
        app.router.add_get("/api/missions/{mission}", self._mission)
        app.router.add_get("/api/missions/{mission}/artifacts/{hash}", self._artifact)
        app.router.add_post("/api/missions/{mission}/drafts", self._draft)
        app.router.add_post("/api/missions/{mission}/decisions", self._decide)
        return app

    @contextlib.asynccontextmanager
    async def listening(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serve on ``host:port`` (0: any free port); yields the console's URL."""
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
            bound = runner.addresses[0]
            url = f"http://{host}:{bound[1]}/"
            self.logins.console = self.logins.console or url
            yield url
        finally:
            await runner.cleanup()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.headers.get(HEADER) != "1":
            return _failure(MwpError(ErrorCode.AUTH_FORBIDDEN, f"a console request sets {HEADER}"))
        try:
            response = await handler(request)
        except MwpError as error:
            response = _failure(error)
        except web.HTTPException:
            raise
        except Exception:  # a defect: typed, never a stack trace in the page
            response = _failure(MwpError(ErrorCode.INTERNAL_ERROR, "the console failed"))
        response.headers.setdefault("Content-Security-Policy", PAGE_POLICY)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    # --- who is asking -----------------------------------------------------------------------

    def _login_of(self, request: web.Request) -> Login:
        return self.logins.who(request.cookies.get(COOKIE), self.clock())

    def _organization_id(self) -> str:
        organization_id = self.organization()
        if organization_id is None:
            raise MwpError(
                ErrorCode.GROUP_NOT_FOUND, "no Organization yet: run `mwp registry init`"
            )
        return organization_id

    @staticmethod
    async def _body(request: web.Request) -> Json:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise MwpError(ErrorCode.INVALID_COMMAND, "the request body is a JSON object")
        return body

    # --- handlers --------------------------------------------------------------------------

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name, media_type = STATIC[request.path]
        text = resources.files("mwp.console").joinpath("static", name).read_text("utf-8")
        return web.Response(text=text, content_type=media_type, charset="utf-8")

    async def _challenge(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        human_id, key_id = body.get("humanId"), body.get("keyId")
        if not isinstance(human_id, str) or not isinstance(key_id, str):
            raise MwpError(ErrorCode.INVALID_COMMAND, "humanId and keyId are strings")
        self._organization_id()
        return web.json_response(self.logins.challenge(human_id, key_id, self.clock()))

    async def _login(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        challenge_id, signature = body.get("challengeId"), body.get("signature")
        if not isinstance(challenge_id, str) or not isinstance(signature, str):
            raise MwpError(ErrorCode.INVALID_COMMAND, "challengeId and signature are strings")
        registry = self.client.registry(self._organization_id())
        evidence = await registry.evidence()
        token, login = self.logins.answer(challenge_id, signature, evidence, self.clock())
        response = web.json_response({"principal": login.principal.to_json()})
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="Strict",
            max_age=self.logins.session_seconds,
            path="/",
        )
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        self.logins.logout(request.cookies.get(COOKIE))
        response = web.json_response({})
        response.del_cookie(COOKIE, path="/")
        return response

    async def _me(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"principal": self._login_of(request).principal.to_json()})

    async def _missions(self, request: web.Request) -> web.StreamResponse:
        human = self._login_of(request).principal
        missions = await reading.owned_missions(self.client, human, self.closed)
        return web.json_response({"missions": missions})

    async def _owned(self, request: web.Request) -> tuple[Principal, Any, Json]:
        human = self._login_of(request).principal
        handle, view = await reading.owned(self.client, request.match_info["mission"], human)
        return human, handle, view

    async def _mission(self, request: web.Request) -> web.StreamResponse:
        _, handle, view = await self._owned(request)
        return web.json_response(await reading.mission_detail(handle, view))

    async def _artifact(self, request: web.Request) -> web.StreamResponse:
        _, _, view = await self._owned(request)
        entry = reading.artifact_of(view, request.match_info["hash"])
        try:  # the store checks the bytes against their content hash
            data = await asyncio.to_thread(self.artifacts.get, entry["contentHash"])
        except Exception:
            raise MwpError(
                ErrorCode.INTERNAL_ERROR, "the Artifact's bytes are missing or altered"
            ) from None
        response = web.Response(body=data, content_type=_served_type(entry.get("mediaType")))
        response.headers["Content-Security-Policy"] = ARTIFACT_POLICY
        response.headers["X-MWP-Content-Hash"] = entry["contentHash"]
        return response

    async def _draft(self, request: web.Request) -> web.StreamResponse:
        human, handle, view = await self._owned(request)
        body = await self._body(request)
        reason = body.get("reason", "")
        if not isinstance(reason, str):
            raise MwpError(ErrorCode.INVALID_COMMAND, "the reason is a string")
        epochs = await handle.epochs(human.id)
        drafted = decisions.draft(
            view, human, str(body.get("decision")), epochs.get("membershipEpoch"), reason
        )
        return web.json_response(drafted)

    async def _decide(self, request: web.Request) -> web.StreamResponse:
        human, handle, view = await self._owned(request)
        body = await self._body(request)
        command = decisions.forwardable(body.get("command"), human, view)
        result = await handle.send_signed(command)
        self.decided += 1
        return web.json_response(
            {"receipt": result["receipt"], "events": [e["kind"] for e in result["events"]]}
        )


def _served_type(media_type: Any) -> str:
    """The Content-Type an Artifact is served as: text stays text, images stay images,
    anything else downloads as bytes."""
    value = str(media_type or "")
    main = value.split(";", 1)[0].strip().lower()
    if main.startswith("image/") and main != "image/svg+xml":
        return main
    if main.startswith("text/") or main in ("application/json", "application/x-ndjson"):
        return "text/plain"
    return "application/octet-stream"
