"""The MissionOwner at the console, without a browser: the same HTTP calls the console's page
makes, and the same signatures (the login challenge, the Approval, the Command), made with
the human's key from the state folder. The demo drives its human step with this."""

from __future__ import annotations

from typing import Any

import aiohttp

from mwp.client import Identity
from mwp.console.server import HEADER
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import b64url_encode

Json = dict[str, Any]


class ConsoleRefusedError(RuntimeError):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"the console answered {status}: {body}")
        self.status = status
        self.body = body


class ConsoleSession:
    """One human logged in to the console at ``url``."""

    def __init__(self, url: str, human: Identity) -> None:
        self.url = url.rstrip("/") + "/"
        self.human = human
        # The console is on 127.0.0.1: its cookie is kept although the host is an address.
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))

    async def __aenter__(self) -> ConsoleSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.http.close()

    async def _post(self, path: str, body: Json) -> Json:
        async with self.http.post(self.url + path, json=body, headers={HEADER: "1"}) as answer:
            data = await answer.json()
            if answer.status != 200:
                raise ConsoleRefusedError(answer.status, data)
            return dict(data)

    async def _get(self, path: str) -> Json:
        async with self.http.get(self.url + path) as answer:
            data = await answer.json()
            if answer.status != 200:
                raise ConsoleRefusedError(answer.status, data)
            return dict(data)

    async def log_in(self) -> Json:
        """Answer the console's challenge with a signature over its canonical bytes."""
        challenge = await self._post(
            "api/login/challenge",
            {"humanId": self.human.principal.id, "keyId": self.human.key_id},
        )
        signature = b64url_encode(self.human.key.sign(canonicalize(challenge)))
        return await self._post(
            "api/login", {"challengeId": challenge["challengeId"], "signature": signature}
        )

    async def missions(self) -> list[Json]:
        return list((await self._get("api/missions"))["missions"])

    async def mission(self, mission_id: str) -> Json:
        return await self._get(f"api/missions/{mission_id}")

    async def artifact(self, mission_id: str, content_hash: str) -> tuple[bytes, str, bool]:
        """The Artifact's bytes, the hash the console names, and whether the bytes match it."""
        path = f"{self.url}api/missions/{mission_id}/artifacts/{content_hash}"
        async with self.http.get(path) as answer:
            if answer.status != 200:
                raise ConsoleRefusedError(answer.status, await answer.text())
            data = await answer.read()
            named = answer.headers.get("X-MWP-Content-Hash", "")
        return data, named, named == sha256_ref(data)

    async def decide(self, mission_id: str, decision: str, reason: str = "") -> Json:
        """Draft the decision, sign its Approval and Command as the page does, send it."""
        base = f"api/missions/{mission_id}"
        drafted = await self._post(f"{base}/drafts", {"decision": decision, "reason": reason})
        approval = self.human.sign(drafted["approval"], "approval")
        command = drafted["command"]
        command = {**command, "payload": {**command["payload"], "approval": approval}}
        signed = self.human.sign(command, "command")
        answer = await self._post(f"{base}/decisions", {"command": signed})
        return {**answer, "command": signed}
