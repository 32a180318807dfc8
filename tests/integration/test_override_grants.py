"""Runaway controls and a Cooperation Override Grant on the Temporal path (spec 20): the
Organization's WorkItem depth limit binds (``RATE_LIMITED``, the Group unchanged), the
MissionOwner grants one override through the client SDK, the Coordinator's Command citing it is
accepted once (the grant consumed in the same Update), a byte-equal retry returns the prior
receipt, and any other use of the grant is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mwp.client import MwpClient, new_id
from mwp.client.missions import in_seconds
from mwp.client.override_grants import CooperationOverride
from mwp.core.errors import ErrorCode
from mwp.core.group.cooperation_limits import WORK_ITEM_DEPTH, CooperationLimits
from mwp.core.group.override_grant import CONSUMED_KIND
from mwp.core.group.runaway import THRESHOLD_KIND
from mwp.dev.scenario import work_contract
from mwp.dev.stack import BackgroundStack
from tests.integration.missions_helper import MissionRig, event_of, new_mission, raw
from tests.integration.test_registry_cli import _run

LIMIT = CooperationLimits().work_item_depth  # what the MissionWorkflow decides under


async def authorize_below(
    rig: MissionRig, parent: str | None, goal: str, **envelope: Any
) -> dict[str, Any]:
    """The Coordinator's signed ``work.authorize`` of a new WorkItem under ``parent``."""
    coordinator = rig.crew.coordinator
    payload: dict[str, Any] = {"contract": work_contract(goal, deadline=in_seconds(86400))}
    if parent is not None:
        payload["parentWorkItemId"] = parent
    epochs = await rig.mission.epochs(coordinator.principal.id)
    return coordinator.command(
        "work.authorize",
        payload,
        group_id=rig.mission.group_id,
        session_epoch=rig.crew.session(coordinator),
        membership_epoch=epochs["membershipEpoch"],
        coordinator_epoch=epochs["coordinator"]["coordinatorEpoch"],
        work_item_id=new_id(),
        **envelope,
    )


async def test_a_limit_binds_and_a_grant_lets_one_command_through_once(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, workers=0)
    parent: str | None = None
    for depth in range(1, LIMIT.binding + 1):
        command = await authorize_below(rig, parent, f"Level {depth}")
        result = await rig.mission.send_signed(command)
        kinds = [e["kind"] for e in result["events"]]
        # From the soft threshold on, the Coordinator is notified in the same Update.
        assert kinds == ([THRESHOLD_KIND] if depth >= LIMIT.soft else []) + ["work.authorized"]
        parent = command["workItemId"]

    # One level deeper binds: refused, the Group unchanged.
    action_id = new_id()
    deeper = await authorize_below(rig, parent, "One level too deep", action_id=action_id)
    error = await rig.assert_refused(
        lambda: rig.mission.send_signed(deeper), ErrorCode.RATE_LIMITED
    )
    assert error.wire["details"]["policy"] == WORK_ITEM_DEPTH

    # The MissionOwner grants one override for exactly that Command.
    grant = CooperationOverride(
        WORK_ITEM_DEPTH,
        rig.crew.coordinator.principal,
        "work.authorize",
        action_id,
        reason="The audit needs one more level.",
        expires_at=in_seconds(600),
    )
    grant_id, granted = await rig.mission.grant_cooperation_override(rig.crew.owner, grant)
    assert event_of(granted, "policy.cooperation_override.granted")["payload"]["approver"] == (
        rig.crew.owner.principal.to_json()
    )

    cited = await authorize_below(
        rig,
        parent,
        "One level too deep",
        action_id=action_id,
        cooperation_override_grant_id=grant_id,
    )
    accepted = await rig.mission.send_signed(cited)
    assert [e["kind"] for e in accepted["events"]] == [
        THRESHOLD_KIND,
        CONSUMED_KIND,
        "work.authorized",
    ]
    authorized = accepted["events"][-1]
    assert accepted["events"][1]["payload"]["acceptedEventId"] == authorized["eventId"]
    assert (await rig.mission.work_item(cited["workItemId"]))["state"] == "open"

    # A byte-equal retry returns the prior receipt; any other use of the grant is refused.
    again = await rig.mission.send_signed(cited)  # Temporal's Update-ID deduplication
    assert again["receipt"] == accepted["receipt"]
    decided = await rig.send_wire(raw(cited))  # the Authority's (actor, actionId) receipts
    assert decided["duplicate"] and decided["receipt"] == accepted["receipt"]
    assert decided["events"] == []
    reuse = await authorize_below(
        rig, parent, "Another deep one", cooperation_override_grant_id=grant_id
    )
    error = await rig.assert_refused(
        lambda: rig.mission.send_signed(reuse), ErrorCode.AUTH_FORBIDDEN
    )
    assert error.wire["details"]["reason"] == "override_grant_consumed"


def test_the_cli_grants_an_override_and_a_send_cites_it(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]

    def run(*argv: str) -> tuple[int, str, str]:
        return _run(capsys, *argv, *common)

    assert run("registry", "init", "--org", f"urn:mwp:organization:grant-{tmp_path.name}")[0] == 0
    assert run("registry", "add-human", "ada")[0] == 0
    assert run("registry", "add-agent", "planner", "--owner", "ada")[0] == 0
    code, out, err = run(
        "mission", "create", "--owner", "ada", "--coordinator", "planner",
        "--objective", "Ship the report", "--done", "The report is published.",
    )  # fmt: skip
    assert code == 0, err
    mission = next(line.split()[1] for line in out.splitlines() if line.startswith("Mission "))

    action_id = new_id()
    code, out, err = run(
        "mission", "grant-override", mission, "--as", "ada", "--policy", "messageRate",
        "--for", "planner", "--kind", "message.post", "--action-id", action_id,
        "--reason", "A status burst for the release.",
    )  # fmt: skip
    assert code == 0, err
    assert "policy.cooperation_override.granted" in out
    grant_id = next(
        line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("grant ")
    )
    code, _, err = run("mission", "grant-override", mission, "--as", "planner", "--policy",
                       "messageRate", "--for", "planner", "--kind", "message.post",
                       "--action-id", new_id(), "--reason", "Mine.")  # fmt: skip
    assert code == 1 and "refused: AUTH_FORBIDDEN" in err

    # Cited by a Message that exceeds no limit, the grant does not match: refused, unused.
    message = json.dumps({"content": [{"type": "text", "text": "Status."}]})
    code, _, err = run("mission", "send", mission, "message.post", "--as", "planner",
                       "--payload", message, "--action-id", action_id,
                       "--override-grant", grant_id)  # fmt: skip
    assert code == 1 and "refused: AUTH_FORBIDDEN" in err and '"member": "policyName"' in err
    code, out, err = run("mission", "send", mission, "message.post", "--as", "planner",
                         "--payload", message, "--action-id", action_id)  # fmt: skip
    assert code == 0 and "message.posted" in out, err
