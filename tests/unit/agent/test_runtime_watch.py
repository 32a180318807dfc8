"""The runtime's own lines: a declined offer says why (the card version case in words), once
per decision and only for decisions since the runtime started; a replaced Session stops it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from mwp.workers.runtime_watch import RuntimeWatch, decline_line, replaced_line

NOW = datetime.now(UTC)


def decision(item: str, at: datetime, **details: Any) -> dict[str, Any]:
    return {
        "decision": "declined",
        "groupId": "urn:uuid:5e6f7a8b-0000",
        "workItemId": f"urn:uuid:{item}-0000",
        "decidedAt": at.isoformat().replace("+00:00", "Z"),
        "reason": "capability",
        "details": details,
    }


def test_a_card_version_decline_says_which_versions_and_what_to_do() -> None:
    line = decline_line("writer", decision("ab12cd34", NOW, cardVersion=2, offered=1))
    assert line == (
        "writer: declined work item ab12cd34 of group 5e6f7a8b: capability: the offer pins "
        "Agent Card v1; this runtime serves v2 (offer it again at v2)"
    )
    other = decline_line("writer", decision("ab12cd34", NOW, missing=["acme.code"]))
    assert other.endswith(': capability: {"missing":["acme.code"]}')


class _Registry:
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    async def session_epochs(self) -> dict[str, int]:
        return {"urn:mwp:agent:writer": self.epoch}


class _Handle:
    def __init__(self, decisions: list[dict[str, Any]]) -> None:
        self.decisions = decisions

    async def query(self, name: str) -> dict[str, Any]:
        return {"decisions": list(self.decisions)}


class _Temporal:
    def __init__(self, handle: _Handle) -> None:
        self.handle = handle

    def get_workflow_handle(self, workflow_id: str) -> _Handle:
        assert workflow_id.endswith("urn:mwp:agent:writer")
        return self.handle


async def test_each_new_decline_is_reported_once_and_a_newer_session_stops_the_runtime() -> None:
    handle = _Handle([decision("00000000", NOW - timedelta(hours=1), cardVersion=2, offered=1)])
    registry, lines = _Registry(4), list[str]()
    watch = RuntimeWatch(
        _Temporal(handle), registry, "urn:mwp:agent:writer", 4, lines.append, interval=0.01
    )
    stop = asyncio.Event()
    running = asyncio.create_task(watch.run(stop))
    await asyncio.sleep(0.05)
    handle.decisions.append(decision("ab12cd34", datetime.now(UTC), cardVersion=2, offered=1))
    await asyncio.sleep(0.1)
    assert [line.split(":")[1] for line in lines] == [
        " declined work item ab12cd34 of group 5e6f7a8b"
    ]
    registry.epoch = 5
    await asyncio.wait_for(running, 1)
    assert stop.is_set() and watch.replaced_by == 5
    assert lines[-1] == replaced_line("writer", 4, 5)
