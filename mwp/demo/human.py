"""The MissionOwner's decisions in the proof of concept: made by the demo through the console's
HTTP API with the owner's key (`DrivenOwner`), or, with ``mwp demo --interactive``, by a person
in the console in a browser while the demo waits for each decision to reach the Group
(`PersonAtConsole`). Either way a decision is what the Group recorded, so the checks after it
are the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mwp.client.missions import MissionHandle
from mwp.demo.console_driver import ConsoleSession
from mwp.demo.setup import until

Json = dict[str, Any]
# What each console decision records in the Group.
RECORDED = {"approve": "mission.approved", "request_changes": "mission.changes_requested"}
# How long the demo waits for a person to make one decision.
PERSON_SECONDS = 3600.0


@dataclass(frozen=True)
class Decision:
    events: list[str]  # the Event kinds the Group recorded
    key_id: str  # the key that signed the owner's Approval
    proof: Json  # the receipt's hash, or the Event that recorded it


class Owner(Protocol):
    async def decide(self, mission: MissionHandle, decision: str, reason: str = "") -> Decision:
        """Approve (``approve``) or send back (``request_changes``) the Mission."""
        ...


class DrivenOwner:
    """The demo decides, signing as the page does (`ConsoleSession.decide`)."""

    def __init__(self, console: ConsoleSession) -> None:
        self.console = console

    async def decide(self, mission: MissionHandle, decision: str, reason: str = "") -> Decision:
        answer = await self.console.decide(mission.mission_id, decision, reason)
        approval = answer["command"]["payload"]["approval"]
        return Decision(
            answer["events"],
            approval["signature"]["keyId"],
            {"receipt": answer["receipt"]["signingHash"]},
        )


class PersonAtConsole:
    """A person decides in the console; the demo says what to do and waits for the Event."""

    def __init__(self, console_url: str, key_file: str, out: Any) -> None:
        self.console_url = console_url
        self.out = out
        out(
            f">>> Open the console at {self.console_url} and log in with the MissionOwner's "
            f"key file {key_file}"
        )

    async def decide(self, mission: MissionHandle, decision: str, reason: str = "") -> Decision:
        view = await mission.view()
        asked = "request changes (any reason)" if decision == "request_changes" else "approve"
        self.out(f">>> In the console, {asked}: {view['objective']}")
        kind = RECORDED[decision]
        event: Json = await until(
            f"the MissionOwner to {asked} in the console",
            lambda: _recorded(mission, kind, view["sequence"]),
            PERSON_SECONDS,
        )
        approval = event["payload"]["approval"]
        proof = {"eventId": event["eventId"], "commandHash": event.get("commandHash")}
        return Decision([event["kind"]], approval["signature"]["keyId"], proof)


async def _recorded(mission: MissionHandle, kind: str, after: int) -> Json | None:
    """The first Event of ``kind`` the Mission recorded after ``after``."""
    return next((e for e in await mission.events_this_run(after) if e["kind"] == kind), None)
