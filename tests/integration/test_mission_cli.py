"""`mwp mission` against the session's dev server: create, list, show, send, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mwp.dev_stack import BackgroundStack
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
    code, _, err = run("mission", "send", mission, "message.post", "--as", "planner",
                       "--payload", "{nope")  # fmt: skip
    assert code == 1 and "--payload is not JSON" in err
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
