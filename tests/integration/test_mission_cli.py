"""`mwp mission` against the session's dev server: create, list, show, send, refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mwp.client import Identity, KeyStore, connect, new_id
from mwp.client.missions import MissionClient, in_seconds
from mwp.core.trust.registry import Principal
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
        "expiresAt": in_seconds(3600),
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


def test_work_commands_name_each_mistake_and_send_nothing(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]

    def run(*argv: str) -> tuple[int, str, str]:
        return _run(capsys, *argv, *common)

    assert run("registry", "init", "--org", f"urn:mwp:organization:work-{tmp_path.name}")[0] == 0
    assert run("registry", "add-human", "ada")[0] == 0
    assert run("registry", "add-agent", "planner", "--owner", "ada")[0] == 0
    assert run("registry", "add-agent", "coder", "--owner", "ada",
               "--capability", "acme.code@2.1.0")[0] == 0  # fmt: skip
    code, out, err = run("mission", "create", "--owner", "ada", "--coordinator", "planner",
                         "--objective", "Ship it")  # fmt: skip
    assert code == 0, err
    mission = next(line.split()[1] for line in out.splitlines() if line.startswith("Mission "))
    sequence = json.loads(run("mission", "show", mission, "--json")[1])["sequence"]

    def refused(*argv: str, why: str) -> None:
        code, out, err = run("mission", *argv)
        assert code == 1 and why in err and "Traceback" not in err, (out, err)

    refused("send", mission, "work.ofer", "--as", "planner", why="did you mean work.offer")
    refused("authorize", mission, "--as", "planner", why="a WorkItem needs a goal")
    contract_file = tmp_path / "item.toml"
    contract_file.write_text('goal = "Port it"\nowner = "me"\n')
    refused("authorize", mission, "--as", "planner", "--contract", str(contract_file),
            why="unknown keys owner")  # fmt: skip
    contract_file = tmp_path / "item.json"
    contract_file.write_text('{"goal": "Port it", "goal": "twice"}')
    refused("authorize", mission, "--as", "planner", "--contract", str(contract_file),
            why="duplicate member name 'goal'")  # fmt: skip
    assert json.loads(run("mission", "show", mission, "--json")[1])["sequence"] == sequence

    # A contract file: the short keys, and a Work Contract member under [contract].
    contract_file = tmp_path / "port.toml"
    contract_file.write_text(
        'goal = "Port the parser"\ncriteria = ["It parses", "It is fast"]\n'
        'capability = "acme.code@2.0.0"\n[contract]\nrequestedUrgency = "high"\n'
    )
    code, out, err = run("mission", "authorize", mission, "--as", "planner",
                         "--contract", str(contract_file))  # fmt: skip
    assert code == 0, err
    item = next(line.split()[1] for line in out.splitlines() if line.startswith("WorkItem "))
    view = json.loads(run("mission", "show", mission, "--json")[1])
    [authorized] = [i for i in view["workItems"] if i["workItemId"] == item]
    sequence = view["sequence"]

    # Offers: no Agent Card, a card that does not serve the capability, a wrong ID.
    short = item.rsplit(":", 1)[-1][:8]
    refused("offer", mission, short, "--as", "planner", "--to", "ada",
            why="offers go to agents; urn:mwp:human:ada is a human")  # fmt: skip
    ghost = Identity.generate(Principal("agent", "urn:mwp:agent:ghost"))
    KeyStore.in_state_dir(state).save("agent-ghost", ghost)  # a key, but never registered
    refused("offer", mission, short, "--as", "planner", "--to", "ghost",
            why="urn:mwp:agent:ghost has no Agent Card")  # fmt: skip
    refused("offer", mission, item, "--as", "planner", "--to", "planner",
            why="does not serve acme.code@2.0.0 (it declares mwp.dev.general@1.0.0)")  # fmt: skip
    refused("offer", mission, "zzzz", "--as", "planner", "--to", "coder",
            why="no WorkItems of this Mission match 'zzzz'")  # fmt: skip
    refused("review", mission, item, "--as", "planner", "--accept", why="not submitted")
    refused("review", mission, item, "--as", "planner", "--reject", why="--reject needs --reason")
    refused("submit", mission, "--as", "planner", why="no WorkItem is verified yet")
    refused("wait", mission, item, "--for", "done", why="unknown WorkItem state 'done'")
    assert json.loads(run("mission", "show", mission, "--json")[1])["sequence"] == sequence

    # The card that serves it (2.1.0 for 2.0.0: same major, newer): offered at its version.
    code, out, err = run("mission", "offer", mission, item, "--as", "planner", "--to", "coder")
    assert code == 0, err
    assert "(Agent Card v1)" in out and "work.offer.created" in out
    # The coder is new to the Group: the offer carried (and published) its Context Package.
    assert "ext.missionweaveprotocol.core.context_package_published" in out
    code, out, _ = run("mission", "show", mission, "--json")
    offered = json.loads(out)
    [record] = [i for i in offered["workItems"] if i["workItemId"] == item]
    assert record["state"] == "offered" and authorized["state"] == "open"
