"""The Agent declaration, its Agent Card, and tool idempotency keys (MWP-WRK-031)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from mwp.agent import (
    Agent,
    AgentDeclarationError,
    CardInfo,
    SchemaRef,
    Submission,
    attempt_key,
    tool_key,
)
from mwp.client import Identity
from mwp.core.models import DocumentInvalid, validate_document
from mwp.core.trust.registry import Principal
from mwp.workers.agent import agent_input

AGENT_ID = "urn:mwp:agent:acme:writer"
ORG = "urn:mwp:organization:acme"
OWNER = Principal("human", "urn:mwp:human:olivia")
M, W = "urn:mwp:mission:m1", "urn:mwp:work-item:w1"


def declare(max_concurrency: int = 2) -> Agent:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    return Agent(
        AGENT_ID,
        identity,
        card=CardInfo(ORG, OWNER, "Report writer"),
        max_concurrency=max_concurrency,
    )


def test_decorators_register_plain_async_functions_and_the_card_is_valid() -> None:
    agent = declare()
    report_schema = SchemaRef.of("urn:acme:schema:report", {"type": "object", "required": ["a"]})

    @agent.capability("acme.report.write", "1.2.0", output_schema=report_schema)
    async def write(ctx: Any) -> Submission:
        raise NotImplementedError

    @agent.tool("search")
    async def search(query: str) -> list[str]:
        return [query]

    # The functions come back unchanged: still plain functions a test can call.
    assert write.__name__ == "write" and agent.tools["search"].fn is search
    card = agent.card(issued_at="2026-01-01T00:00:00Z")
    assert card["maxConcurrency"] == 2 and card["agentId"] == AGENT_ID
    entry = card["capabilities"][0]
    assert (entry["id"], entry["version"]) == ("acme.report.write", "1.2.0")
    assert entry["outputSchemaHash"] == report_schema.hash
    assert entry["outputSchemaHash"] != entry["inputSchemaHash"]
    registrar = Identity.generate(Principal("service", "urn:mwp:service:acme:registry"))
    validate_document("agent-card.schema.json", registrar.sign(card, "agent-card"))
    contract_ref = [{"id": "acme.report.write", "version": "1.2.0"}]
    assert agent.capability_for(contract_ref) is agent.capabilities[0]
    assert agent.capability_for([{"id": "acme.report.write", "version": "2.0.0"}]) is None


def test_a_card_with_a_bad_member_fails_the_schema() -> None:
    agent = declare()

    @agent.capability("acme.report.write", "1.0.0")
    async def write(ctx: Any) -> Submission:
        raise NotImplementedError

    registrar = Identity.generate(Principal("service", "urn:mwp:service:acme:registry"))
    card = agent.card()
    card["maxConcurrency"] = 0
    with pytest.raises(DocumentInvalid):
        validate_document("agent-card.schema.json", registrar.sign(card, "agent-card"))


@pytest.mark.parametrize(
    ("capability_id", "version"),
    [("Acme.Report", "1.0.0"), ("report", "1.0.0"), ("acme.report", "1.0"), ("acme.r", "v1.0.0")],
)
def test_malformed_capability_ids_and_versions_are_refused(
    capability_id: str, version: str
) -> None:
    with pytest.raises(AgentDeclarationError):
        declare().capability(capability_id, version)


def test_declaration_errors() -> None:
    agent = declare()

    def not_async(ctx: Any) -> None: ...

    with pytest.raises(AgentDeclarationError, match="async def"):
        agent.capability("acme.report.write", "1.0.0")(not_async)  # type: ignore[arg-type]
    with pytest.raises(AgentDeclarationError, match="async def"):
        agent.tool("search")(not_async)

    async def fn(ctx: Any) -> Submission:
        raise NotImplementedError

    agent.capability("acme.report.write", "1.0.0")(fn)
    with pytest.raises(AgentDeclarationError, match="twice"):
        agent.capability("acme.report.write", "1.0.0")(fn)
    agent.capability("acme.report.write", "1.1.0")(fn)  # another version is another capability
    with pytest.raises(AgentDeclarationError):
        declare(max_concurrency=0)
    with pytest.raises(AgentDeclarationError, match="at least one capability"):
        declare().card()
    human = Identity.generate(Principal("human", AGENT_ID))
    with pytest.raises(AgentDeclarationError, match="agent's own"):
        Agent(AGENT_ID, human, card=CardInfo(ORG, OWNER, "x"))


def test_tool_key_is_stable_and_depends_on_exactly_its_four_inputs() -> None:
    key = tool_key(M, W, 3, "search:q1")
    assert key.startswith("sha256:") and len(key) == 71
    # Same inputs, same key, in any process: pinned to its value.
    assert key == tool_key(M, W, 3, "search:q1")
    preimage = (
        b'{"missionId":"urn:mwp:mission:m1","opId":"search:q1","ownershipEpoch":3,'
        b'"purpose":"urn:mwp:tool-idempotency-key:v1","workItemId":"urn:mwp:work-item:w1"}'
    )
    assert key == "sha256:" + hashlib.sha256(preimage).hexdigest()
    others = {
        tool_key("urn:mwp:mission:m2", W, 3, "search:q1"),
        tool_key(M, "urn:mwp:work-item:w2", 3, "search:q1"),
        tool_key(M, W, 4, "search:q1"),  # a new owner after fencing: fresh keys
        tool_key(M, W, 3, "search:q2"),
    }
    assert key not in others and len(others) == 4


@pytest.mark.parametrize(
    "args",
    [
        ("not a uri", W, 1, "op"),
        (M, W, 0, "op"),
        (M, W, True, "op"),
        (M, W, 2**53, "op"),
        (M, W, 1, ""),
        (M, W, 1, " "),
        (M, W, 1, "x" * 501),
    ],
)
def test_tool_key_refuses_bad_inputs(args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        tool_key(*args)


def test_attempt_keys_are_deterministic_and_distinct_per_attempt() -> None:
    key = tool_key(M, W, 1, "pay")
    assert attempt_key(key, 1) == attempt_key(key, 1)
    assert len({attempt_key(key, n) for n in range(1, 6)} | {key}) == 6
    with pytest.raises(ValueError):
        attempt_key(key, 0)
    with pytest.raises(ValueError):
        attempt_key("pay", 1)


@pytest.mark.parametrize("declared", [0, -5, 1.5, 7 * 86400 + 1])
def test_a_mean_run_outside_one_second_to_a_week_is_refused(declared: Any) -> None:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    with pytest.raises(AgentDeclarationError, match="mean_run_seconds"):
        Agent(AGENT_ID, identity, card=CardInfo(ORG, OWNER, "x"), mean_run_seconds=declared)


def test_the_schedulers_input_carries_the_declared_mean_run() -> None:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    quick = Agent(AGENT_ID, identity, card=CardInfo(ORG, OWNER, "x"), mean_run_seconds=20)
    assert agent_input(quick, 1, 1).mean_duration_seconds == 20
    assert agent_input(declare(), 1, 1).mean_duration_seconds == 600  # the default
    assert agent_input(quick, 1, 1, mean_duration_seconds=90).mean_duration_seconds == 90
