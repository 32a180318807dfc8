"""The first example of docs/agents.md runs as written: in a folder prepared as its comment
says (an Organization and the agent's key), it declares its agent and, through the local
runner, its capability calls its tool once, checkpoints, publishes and submits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mwp.agent import Agent, LocalCapabilityRunner
from mwp.client import Identity, KeyStore
from mwp.client.state_dir import ORGANIZATION_FILE
from mwp.core.trust.registry import Principal
from mwp.stores.objects import FolderObjectStore
from tests.unit.group.harness import contract

ROOT = Path(__file__).resolve().parents[3]


def first_snippet() -> str:
    text = (ROOT / "docs" / "agents.md").read_text()
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found is not None
    return found.group(1)


async def test_the_first_agents_doc_example_runs_to_a_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / ".mwp"
    KeyStore.in_state_dir(state).save(
        "agent-reporter", Identity.generate(Principal("agent", "urn:mwp:agent:reporter"))
    )
    (state / ORGANIZATION_FILE).write_text(json.dumps({"organizationId": "urn:mwp:org:acme"}))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "agents_doc_example"}
    exec(compile(first_snippet(), "docs/agents.md", "exec"), namespace)

    agent = namespace["agent"]
    assert isinstance(agent, Agent)
    assert agent.card()["organizationId"] == "urn:mwp:org:acme"
    required = [{"id": "acme.report.write", "version": "1.0.0"}]
    runner = LocalCapabilityRunner(
        agent, contract(requiredCapabilities=required), FolderObjectStore(tmp_path / "objects")
    )
    outcome = await runner.run()
    assert outcome.status == "submitted", outcome
    kinds = [c.kind for c in runner.commands]
    assert kinds[0] == "work.start" and kinds[-1] == "work.submit"
    assert "artifact.publish" in kinds
