"""`mwp registry` against the session's dev server: from nothing to registered identities."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from mwp.cli import main
from mwp.client import Identity, KeyStore, connect, wire_text
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import verify
from mwp.dev.stack import BackgroundStack, free_port


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_registry_commands_go_from_nothing_to_a_verifiable_signed_command(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]
    organization = f"urn:mwp:organization:cli-{tmp_path.name}"

    code, out, err = _run(capsys, "registry", "add-human", "ada", *common)
    assert code == 1 and "run `mwp registry init` first" in err

    code, out, err = _run(capsys, "registry", "init", "--org", organization, *common)
    assert code == 0, err
    # The trust root (revision 1), then the Group Authority's key binding (revision 2).
    assert organization in out and "revision 2" in out and "Authority key" in out
    code, out, _ = _run(capsys, "registry", "init", *common)  # idempotent
    assert code == 0 and "revision 2" in out

    code, out, err = _run(capsys, "registry", "add-human", "ada", *common)
    assert code == 0, err
    assert "urn:mwp:human:ada" in out
    code, out, err = _run(
        capsys,
        "registry",
        "add-agent",
        "builder",
        "--owner",
        "ada",
        "--capability",
        "acme.code.python@2.0.0",
        *common,
    )
    assert code == 0, err
    assert "Session Epoch 1" in out and "Agent Card version 1" in out
    code, out, err = _run(capsys, "registry", "add-agent", "builder", *common)
    assert code == 0 and "Session Epoch 2" in out  # a new session fences the first

    code, out, _ = _run(capsys, "registry", "show", "--json", *common)
    shown = json.loads(out)
    assert shown["sessionEpochs"] == {"urn:mwp:agent:builder": 2}
    assert shown["agentCards"] == {"urn:mwp:agent:builder": 1}
    # registry service, Group Authority, ada, builder
    assert len(shown["evidence"]["bindings"]) == 4
    code, out, _ = _run(capsys, "registry", "show", *common)
    assert code == 0 and "urn:mwp:agent:builder" in out and "Session Epoch 2" in out

    keys = KeyStore.in_state_dir(state)
    assert keys.names() == ["agent-builder", "human-ada", "registry-service"]
    for name in keys.names():
        assert stat.S_IMODE(keys.path(name).stat().st_mode) == 0o600
    assert stat.S_IMODE(keys.directory.stat().st_mode) == 0o700
    seed_text = json.loads(keys.path("human-ada").read_text())["seed"]
    assert seed_text not in out and seed_text not in repr(keys.load("human-ada"))

    # The human's key file signs a Command the registry's evidence verifies.
    ada = keys.load("human-ada")
    command = ada.command("mission.create", {"note": "anything"}, group_id="urn:mwp:group:g")

    async def evidence() -> RegistryEvidence:
        client = await connect(temporal_stack.address)
        return await client.registry(organization).evidence()

    verified = verify(wire_text(command).encode(), "command", asyncio.run(evidence()))
    assert verified.principal == ada.principal


def test_registry_commands_explain_a_missing_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{free_port()}"
    code, _, err = _run(
        capsys, "registry", "init", "--address", address, "--state-dir", str(tmp_path)
    )
    assert code == 1
    assert f"cannot reach Temporal at {address}" in err and "mwp dev" in err


def test_key_files_refuse_loose_permissions(tmp_path: Path) -> None:
    from mwp.client import ClientError
    from mwp.core.trust.registry import Principal

    identity = Identity.generate(Principal("human", "urn:mwp:human:ada"))
    path = tmp_path / "ada.json"
    identity.save(path)
    assert Identity.load(path).key_id == identity.key_id
    path.chmod(0o644)
    with pytest.raises(ClientError, match="readable by others"):
        Identity.load(path)
