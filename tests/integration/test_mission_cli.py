"""`mwp mission` against the session's dev server: create, list, show, send, refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mwp.client import connect, new_id
from mwp.client.missions import MissionClient, in_seconds
from mwp.dev.scenario import selection_basis, work_contract
from mwp.dev.stack import BackgroundStack
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import open_store
from tests.integration.test_registry_cli import _run


def test_a_mission_is_created_inspected_and_steered_from_the_command_line(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]
    organization = f"urn:mwp:organization:mission-cli-{tmp_path.name}"

    def run(*argv: str) -> tuple[int, str, str]:
        return _run(capsys, *argv, *common)

    assert run("registry", "init", "--org", organization)[0] == 0
    assert run("registry", "add-human", "ada")[0] == 0
    assert run("registry", "add-agent", "planner", "--owner", "ada")[0] == 0

    code, out, err = run(
        "mission", "create", "--owner", "ada", "--coordinator", "planner",
        "--objective", "Ship the report", "--done", "The report is published.",
    )  # fmt: skip
    assert code == 0, err
    mission = next(line.split()[1] for line in out.splitlines() if line.startswith("Mission "))
    assert "mission.created" in out

    code, out, _ = run("mission", "list")
    assert code == 0 and mission in out and "active" in out
    code, out, _ = run("mission", "show", mission[:20], "--json")
    view = json.loads(out)
    assert view["missionId"] == mission and view["state"] == "active"
    assert view["objective"] == "Ship the report"

    message = json.dumps({"content": [{"type": "text", "text": "On it."}]})
    code, out, err = run("mission", "send", mission, "message.post", "--as", "planner",
                         "--payload", message)  # fmt: skip
    assert code == 0, err
    assert "accepted: sequence" in out and "message.posted" in out

    # Refusals are typed, printed, exit 1, and change nothing.
    before = json.loads(run("mission", "show", mission, "--json")[1])["sequence"]
    code, _, err = run("mission", "send", mission, "message.post", "--as", "planner",
                       "--payload", '{"content": "not a list"}')  # fmt: skip
    assert code == 1 and "refused: INVALID_COMMAND" in err
    for text, why in [
        ("{nope", "Expecting property name"),
        ('{"content": NaN}', "NaN is not a JSON value"),
        ('{"content": [], "content": []}', "duplicate member name 'content'"),
    ]:
        code, out, err = run("mission", "send", mission, "message.post", "--as", "planner",
                             "--payload", text)  # fmt: skip
        assert code == 1 and "--payload is not strict JSON" in err and why in err, err
        assert "Traceback" not in err and out == ""
    code, _, err = run("mission", "approve", mission, "--as", "ada")
    assert code == 1 and "not awaiting approval" in err
    code, _, err = run(
        "mission", "create", "--owner", "ada", "--coordinator", "planner",
        "--objective", "Fix it", "--follow-up-to", mission,
    )  # fmt: skip
    assert code == 1 and "refused: INVALID_COMMAND" in err and "approved" in err
    assert json.loads(run("mission", "show", mission, "--json")[1])["sequence"] == before
    code, _, err = run("mission", "show", "urn:nothing")
    assert code == 1 and "no Missions match" in err


def test_an_owner_publishes_a_file_as_an_artifact_from_the_command_line(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]

    def run(*argv: str) -> tuple[int, str, str]:
        return _run(capsys, *argv, *common)

    def send(actor: str, kind: str, payload: dict[str, Any]) -> str:
        code, out, err = run("mission", "send", mission, kind, "--as", actor,
                             "--work-item", item, "--payload", json.dumps(payload))  # fmt: skip
        assert code == 0, err
        return out

    assert run("registry", "init", "--org", f"urn:mwp:organization:pub-{tmp_path.name}")[0] == 0
    assert run("registry", "add-human", "ada")[0] == 0
    assert run("registry", "add-agent", "planner", "--owner", "ada")[0] == 0
    assert run("registry", "add-agent", "builder", "--owner", "ada")[0] == 0
    code, out, err = run("mission", "create", "--owner", "ada", "--coordinator", "planner",
                         "--objective", "Ship the report")  # fmt: skip
    assert code == 0, err
    mission = next(line.split()[1] for line in out.splitlines() if line.startswith("Mission "))
    builder = "urn:mwp:agent:builder"
    item = new_id()
    contract = work_contract("Write the report", deadline=in_seconds(86_400))
    send("planner", "membership.change", {"memberId": builder, "role": "worker"})
    send("planner", "work.authorize", {"contract": contract})
    send("planner", "work.offer", {
        "candidates": [{"agentId": builder, "selectionBasis": selection_basis(in_seconds(60))}],
        "expiresAt": in_seconds(3600), "contextPackageId": new_id(),
    })  # fmt: skip
    view = _work_item(temporal_stack, state, mission, item)
    send("builder", "work.accept_offer", {"offerId": view["offers"][0]["offerId"],
                                          "contractVersion": 1})  # fmt: skip
    send("builder", "work.start", {"ownershipEpoch": 1})

    report = tmp_path / "report.txt"
    report.write_bytes(b"The quarterly report.\n" * 1000)
    code, _, err = run("mission", "publish", mission, str(report), "--as", "planner",
                       "--work-item", item)  # fmt: skip
    assert code == 1 and "owner is urn:mwp:agent:builder" in err
    code, out, err = run("mission", "publish", mission, str(report), "--as", "builder",
                         "--work-item", item, "--media-type", "text/plain")  # fmt: skip
    assert code == 0, err
    assert "artifact.published" in out
    content_hash = next(line.split()[1] for line in out.splitlines() if line.startswith("Artifact"))
    stored = ArtifactStore(open_store(state / "objects")).get(content_hash)
    assert stored == report.read_bytes()
    view = _work_item(temporal_stack, state, mission, item)
    assert view["revision"] >= 4
    code, _, err = run("mission", "publish", mission, str(tmp_path / "missing.txt"), "--as",
                       "builder", "--work-item", item)  # fmt: skip
    assert code == 1 and "missing.txt" in err


def _work_item(stack: BackgroundStack, state: Path, mission: str, item: str) -> dict[str, Any]:
    async def query() -> dict[str, Any]:
        client = await connect(stack.address)
        groups = json.loads((state / "missions.json").read_text())
        organization = json.loads((state / "organization.json").read_text())["organizationId"]
        handle = MissionClient(client, organization).mission(mission, groups[mission])
        return await handle.work_item(item)

    return asyncio.run(query())
