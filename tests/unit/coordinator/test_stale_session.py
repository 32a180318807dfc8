"""A restarted Coordinator runtime's first Commands may reach a Group before the Registry told
it of the runtime's new Session: refused as from a stale Session, they are decided again a
moment later, not at the next Event of some Group (a quiet one waited for the 5 s tick)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from mwp.contracts.errors import RemoteMwpError
from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.runtime import CoordinatorRuntime
from mwp.core.errors import MwpError
from tests.unit.coordinator.test_runtime_steps import PureLink, coordinator, in_process
from tests.unit.group.harness import COORD, item_id, mission_harness


class RemoteLink(PureLink):
    """Refusals come back as the gateway sends them: remote errors."""

    async def command(self, command: Any) -> list[dict[str, Any]]:
        try:
            return await super().command(command)
        except MwpError as error:
            raise RemoteMwpError(error.to_wire(self.h.now)) from None


async def test_a_command_refused_as_from_a_stale_session_is_decided_again_soon(
    tmp_path: Path,
) -> None:
    h = mission_harness()
    link = RemoteLink(h)
    link.session_epoch = h.sessions[COORD.id] + 1  # its HELLO opened a Session the Group
    lines: list[str] = []  # has not learned yet
    c = coordinator()
    rt = CoordinatorRuntime(
        c,
        cast(Any, link),
        PlanJournal(tmp_path),
        report=lines.append,
        clock=lambda: datetime.fromisoformat(h.now.replace("Z", "+00:00")),
        id_of=lambda group, key: item_id(key),
        decisions=in_process(c),
    )
    for event in h.events:
        rt.follow(event)
    (group,) = rt.groups.values()
    rt.changed.clear()
    await rt._reconcile(group)
    assert any("AUTH_STALE_SESSION" in line for line in lines), lines
    assert not rt.changed.is_set()

    h.sessions[COORD.id] = link.session_epoch  # the Registry's notice: no Event in any Group
    await asyncio.wait_for(rt.changed.wait(), 1.0)  # decided again, well before the tick
    rt.changed.clear()
    await rt._reconcile(group)
    assert [c["kind"] for c in link.sent][-2:] == ["mission.renew_coordinator"] * 2
    assert rt.steps_taken >= 1
