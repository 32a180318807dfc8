"""Organization-configured cooperation limits on the Temporal path (spec 20, MWP-EXT-006).

A Mission created through a ``MissionClient`` that carries the Organization's limits decides
under them in every run (continue-as-new carries them) and in its child Missions; a Mission
created without limits decides under the defaults. ``mwp mission create --cooperation-limits``
refuses a file that is not valid limits before it starts anything.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mwp.cli.mission_context import MISSIONS_FILE
from mwp.client import Identity, MwpClient
from mwp.client.missions import MissionClient
from mwp.core.errors import ErrorCode
from mwp.core.group.cooperation_limits import (
    MESSAGE_RATE,
    RATE_WINDOW_SECONDS,
    CooperationLimits,
    Limit,
)
from mwp.core.group.runaway import THRESHOLD_KIND
from mwp.dev.stack import BackgroundStack
from tests.integration.missions_helper import MissionRig, create_command, new_crew
from tests.integration.test_child_and_follow_up_missions import _promote
from tests.integration.test_registry_cli import _run

LOW = CooperationLimits(message_rate=Limit(2, 3))


async def limited_mission(
    client: MwpClient,
    limits: CooperationLimits | None,
    *,
    updates_per_run: int | None = None,
    spares: int = 0,
) -> MissionRig:
    """A Mission whose owner created it through a client carrying ``limits``."""
    crew = await new_crew(client, workers=0, spares=spares)
    missions = MissionClient(
        client,
        crew.organization.organization_id,
        updates_per_run=updates_per_run,
        cooperation_limits=limits,
    )
    command = create_command(crew)
    created = await missions.create_signed(command)
    mission = missions.mission(command["payload"]["missionId"], command["groupId"])
    return MissionRig(crew, missions, mission, created, command)


def rate_window_wait(seconds_needed: int = 15) -> float:
    """How long to wait so the next Commands fall in one fixed rate window of the clock."""
    into = datetime.now(UTC).timestamp() % RATE_WINDOW_SECONDS
    return RATE_WINDOW_SECONDS - into + 0.5 if into > RATE_WINDOW_SECONDS - seconds_needed else 0


async def within_one_rate_window() -> None:
    await asyncio.sleep(rate_window_wait())


async def assert_rate_binds(rig: MissionRig, author: Identity, limit: Limit) -> None:
    """``author``'s Messages notify from ``limit.soft`` on and are refused past its binding."""
    for count in range(1, limit.binding + 1):
        result = await rig.post(author, f"Status {count}.")
        kinds = [e["kind"] for e in result["events"]]
        assert kinds == ([THRESHOLD_KIND] if count >= limit.soft else []) + ["message.posted"]
        if count >= limit.soft:
            notice = result["events"][0]["payload"]
            assert notice["policyName"] == MESSAGE_RATE and notice["observed"] == count
            assert (notice["softThreshold"], notice["limit"]) == (limit.soft, limit.binding)
    error = await rig.assert_refused(
        lambda: rig.post(author, "One too many."), ErrorCode.RATE_LIMITED
    )
    assert error.wire["details"] == {
        "policy": MESSAGE_RATE,
        "limit": limit.binding,
        "observed": limit.binding + 1,
    }


async def test_a_mission_decides_under_its_organizations_limits_across_runs(
    mwp_client: MwpClient,
) -> None:
    # Three Commands a run: the Messages span runs, so continue-as-new must carry the limits.
    limited, default = await asyncio.gather(
        limited_mission(mwp_client, LOW, updates_per_run=3),
        limited_mission(mwp_client, None),
    )
    await within_one_rate_window()
    await assert_rate_binds(limited, limited.crew.coordinator, LOW.message_rate)
    assert await mwp_client.query(limited.workflow_id, "run_number") >= 2

    # Without limits the defaults decide: the same Messages are taken, none notifies.
    for count in range(1, LOW.message_rate.binding + 2):
        result = await default.post(default.crew.coordinator, f"Status {count}.")
        assert [e["kind"] for e in result["events"]] == ["message.posted"]


async def test_a_child_mission_decides_under_its_parents_limits(mwp_client: MwpClient) -> None:
    rig = await limited_mission(mwp_client, CooperationLimits(message_rate=Limit(1, 1)), spares=1)
    item = await rig.authorize("Write the report")
    child, _ = await _promote(rig, item)
    await within_one_rate_window()
    await assert_rate_binds(child, child.crew.coordinator, Limit(1, 1))


def test_the_cli_refuses_invalid_limits_before_creating_anything(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]
    assert _run(capsys, "registry", "init", "--org", f"urn:mwp:organization:lim-{tmp_path.name}",
                *common)[0] == 0  # fmt: skip
    assert _run(capsys, "registry", "add-human", "ada", *common)[0] == 0
    assert _run(capsys, "registry", "add-agent", "planner", "--owner", "ada", *common)[0] == 0
    create = ["mission", "create", "--owner", "ada", "--coordinator", "planner",
              "--objective", "Ship the report", "--done", "The report is published."]  # fmt: skip

    limits = tmp_path / "limits.json"
    limits.write_text(json.dumps({"messageRate": {"soft": 4, "binding": 3}}))
    code, out, err = _run(capsys, *create, "--cooperation-limits", str(limits), *common)
    assert code == 1 and "messageRate" in err and "binding limit" in err
    assert "Mission " not in out and not (state / MISSIONS_FILE).exists()
    limits.write_text(json.dumps({"messageRat": {"soft": 1, "binding": 1}}))
    code, _, err = _run(capsys, *create, "--cooperation-limits", str(limits), *common)
    assert code == 1 and "messageRat: not a cooperation limit" in err

    # Valid limits: the Mission decides under them (the Coordinator's second Message binds).
    limits.write_text(json.dumps(CooperationLimits(message_rate=Limit(1, 1)).to_json()))
    code, out, err = _run(capsys, *create, "--cooperation-limits", str(limits), *common)
    assert code == 0, err
    mission = next(line.split()[1] for line in out.splitlines() if line.startswith("Mission "))
    message = json.dumps({"content": [{"type": "text", "text": "Status."}]})
    time.sleep(rate_window_wait())
    send = ["mission", "send", mission, "message.post", "--as", "planner", "--payload", message]
    code, out, err = _run(capsys, *send, *common)
    assert code == 0 and THRESHOLD_KIND in out, err
    code, _, err = _run(capsys, *send, *common)
    assert code == 1 and "refused: RATE_LIMITED" in err
