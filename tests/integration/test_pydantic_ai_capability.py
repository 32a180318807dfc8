"""A capability whose work a pydantic-ai agent does (``examples/pydantic_ai_agent.py``), served
by the agent runtime on the session's dev server and offline (pydantic-ai's ``FunctionModel``):
offered, run under a lease, submitted and accepted to ``verified``. Its model requests and tool
calls are ``ctx.tool`` calls, so a retried attempt replays them from the ledger."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from examples import pydantic_ai_agent as example
from mwp.agent import CapabilityFailure, LocalCapabilityRunner
from mwp.agent.ledger import ToolLedger
from mwp.client import Identity, KeyStore, MwpClient, new_id
from mwp.client.missions import in_seconds
from mwp.client.state_dir import ORGANIZATION_FILE
from mwp.core.idempotency import tool_key
from mwp.core.trust.registry import Principal
from mwp.dev.scenario import selection_basis, work_contract
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import FolderObjectStore, ObjectStore, open_store
from mwp.workers.agent import load_agent
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import MissionRig, WorkItemRef, event_of, new_mission
from tests.integration.test_agent_runtime import Runtime, agent_runtime, wait_for_state

CAPABILITY = dict(zip(("id", "version"), example.CAPABILITY, strict=True))
CRITERIA = ("Every input is summarized.", "The summary has a title.")


class FlakyModel:
    """The example's scripted model, failing once (retryably) when first asked to summarize."""

    def __init__(self) -> None:
        script = example.scripted_model().function
        assert script is not None
        self.script = script
        self.asked = 0
        self.failed = False

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.asked += 1
        has_read = any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if has_read and not self.failed:
            self.failed = True
            raise CapabilityFailure("the model is overloaded", code="TRANSIENT_TOOL_FAILURE")
        response = self.script(messages, info)
        assert isinstance(response, ModelResponse)  # the script answers synchronously
        return response


@dataclass
class Ledger:
    """The tool ledger of one WorkItem at Ownership Epoch 1, read by op ID."""

    store: ObjectStore
    mission_id: str
    work_item_id: str

    async def result(self, op_id: str) -> Any:
        key = tool_key(self.mission_id, self.work_item_id, 1, op_id)
        record = await ToolLedger(self.store, artifacts=ArtifactStore(self.store)).recorded(key)
        assert record is not None, f"no ledger record for {op_id}"
        return record.result


def tool_calls(response: dict[str, Any]) -> list[str]:
    """The tool call IDs of a recorded model response."""
    return [p["tool_call_id"] for p in response["parts"] if p["part_kind"] == "tool-call"]


def summary_contract(inputs: list[str]) -> dict[str, Any]:
    contract = work_contract("Summarize the quarter", deadline=in_seconds(86400), criteria=CRITERIA)
    return contract | {
        "requiredCapabilities": [CAPABILITY],
        "inputArtifacts": inputs,
        "requiredDeliverables": [
            {
                "deliverableId": "summary",
                "description": "The summary of the inputs",
                "mediaType": "application/json",
                "schema": example.SUMMARY_SCHEMA.uri,
            }
        ],
        # Retried at once: the retry, not its backoff, is what this test is about.
        "retryPolicy": contract["retryPolicy"] | {"backoff": "none"},
    }


async def authorize_and_offer(rig: MissionRig, runtime: Runtime, inputs: list[str]) -> WorkItemRef:
    contract = summary_contract(inputs)
    item = WorkItemRef(new_id(), contract)
    await rig.coordinate("work.authorize", {"contract": contract}, work_item_id=item.work_item_id)
    candidate = {
        "agentId": runtime.agent.agent_id,
        "agentCardVersion": runtime.card_version,
        "selectionBasis": selection_basis(in_seconds(60), CAPABILITY),
    }
    package = await rig.mission.offer_context_package(rig.crew.coordinator, item.work_item_id)
    result = await rig.coordinate(
        "work.offer",
        {"candidates": [candidate], "expiresAt": in_seconds(3600), "contextPackage": package},
        work_item_id=item.work_item_id,
    )
    event_of(result, "work.offer.created")
    return item


async def test_a_pydantic_ai_capability_summarizes_its_inputs_to_verified(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client)
    store = open_store(stack_log_location())
    artifacts = ArtifactStore(store)
    texts = [f"Revenue rose {new_id()}\nby a lot", f"Costs fell {new_id()}\nslightly"]
    inputs = [artifacts.put(t.encode()).content_hash for t in texts]
    model = FlakyModel()
    agent_id = f"urn:mwp:agent:summarizer-{uuid.uuid4().hex[:8]}"
    identity = Identity.generate(Principal("agent", agent_id))
    organization_id = rig.crew.organization.organization_id
    agent = example.build(agent_id, identity, organization_id, model=FunctionModel(model.respond))

    async with agent_runtime(rig, agent=agent) as runtime:
        item = await authorize_and_offer(rig, runtime, inputs)
        await wait_for_state(rig, item, "submitted")
        # The tool ledger is the agent's own (its folder, outside the authority zone).
        ledger = Ledger(open_store(str(runtime.ledger)), rig.mission.mission_id, item.work_item_id)
        first_request = await ledger.result("summarize:model:1")
        calls = tool_calls(first_request)
        reads = [await ledger.result(f"summarize:tool:1:{call}") for call in calls]
        answer = await ledger.result("summarize:model:2")
    await rig.accept_result(item)
    view = await rig.mission.work_item(item.work_item_id)
    assert view["state"] == "verified"

    # The typed output is the Artifact: the summary of what the tool read from each input.
    [content_hash] = view["submission"]["artifactHashes"]
    summary = example.Summary.model_validate_json(artifacts.get(content_hash))
    assert summary.text.splitlines() == [t.splitlines()[0] for t in texts]
    [published] = [
        a for a in (await rig.mission.view())["artifacts"] if a["contentHash"] == content_hash
    ]
    assert published["mediaType"] == "application/json"
    # Its checks are the Evidence: one entry per acceptance criterion, each passed.
    events = await rig.mission.events_this_run()
    [submitted] = [e for e in events if e["kind"] == "work.submitted"]
    criteria = [c["criterionId"] for c in item.contract["acceptanceCriteria"]]
    evidence = [
        (e["criterionIds"], e["result"]) for e in submitted["payload"]["submission"]["evidence"]
    ]
    assert evidence == [([c], "passed") for c in criteria]

    # One run, two attempts: the retry replayed the first model request and both reads from
    # the ledger and asked the model only for the answer the failure had cut off.
    kinds = [e["kind"] for e in events]
    assert kinds.count("work.started") == 1 and kinds.count("work.failed") == 0
    assert model.asked == 3
    assert reads == texts
    [output] = [p["args"] for p in answer["parts"] if p["part_kind"] == "tool-call"]
    assert example.Summary.model_validate(output) == summary


async def test_mwp_agent_run_finds_the_example_in_a_state_dir_and_test_model_drives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `mwp agent run examples.pydantic_ai_agent:agent` loads: the key and Organization of
    ``MWP_STATE_DIR``, the model ``MWP_LLM_MODEL`` names (``test`` is pydantic-ai's TestModel,
    which calls every tool once and makes up its output)."""
    (tmp_path / ORGANIZATION_FILE).write_text(
        json.dumps({"organizationId": "urn:mwp:organization:example"})
    )
    principal = Principal("agent", "urn:mwp:agent:summarizer")
    KeyStore.in_state_dir(tmp_path).save("agent-summarizer", Identity.generate(principal))
    monkeypatch.setenv("MWP_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("MWP_LLM_MODEL", "test")
    vars(example).pop("agent", None)  # built on first use, from this environment
    try:
        agent = load_agent("examples.pydantic_ai_agent:agent")
    finally:
        vars(example).pop("agent", None)  # no other test gets this state dir's agent
    assert agent.card()["organizationId"] == "urn:mwp:organization:example"

    store = FolderObjectStore(tmp_path / "store")
    text = b"The only input"
    contract = summary_contract([ArtifactStore(store).put(text).content_hash])
    runner = LocalCapabilityRunner(agent, contract, store)
    outcome = await runner.run()
    assert outcome.status == "submitted" and outcome.submission is not None
    # TestModel read the input, through the ledger, and checked no criterion of the contract.
    assert [e.result for e in outcome.submission.evidence] == ["inconclusive"] * len(CRITERIA)
    ledger = Ledger(store, runner.mission_id, runner.work_item_id)
    [call] = tool_calls(await ledger.result("summarize:model:1"))
    assert await ledger.result(f"summarize:tool:1:{call}") == text.decode()
