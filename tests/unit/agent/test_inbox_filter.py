"""What an agent's inbox passes to its Scheduler: the kinds it reads, minus renewals without a
checkpoint and other owners' transitions of their own items."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.agent.inbox import concerns, slim
from mwp.core.scheduler.model import TERMS_MEMBERS, Terms
from mwp.dev.scenario import work_contract

ME, OTHER = "urn:example:agent:me", "urn:example:agent:other"


def _event(kind: str, actor: str = OTHER, **payload: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "sequence": 7,
        "workItemId": "urn:example:item:1",
        "actor": {"type": "agent", "id": actor},
        "payload": payload,
        "signature": {"value": "not for the Scheduler"},
    }


@pytest.mark.parametrize(
    "kind",
    [
        "work.authorized",
        "work.offer.created",
        "work.offer.accepted",
        "work.result.accepted",
        "work.failed",
        "work.cancelled",
        "work.checkpointed",
        "ext.missionweaveprotocol.core.ownership_expired",
        "ext.missionweaveprotocol.core.execution_lease_revoked",
    ],
)
def test_group_wide_kinds_pass_whoever_caused_them(kind: str) -> None:
    assert concerns(_event(kind), ME)


@pytest.mark.parametrize(
    "kind",
    [
        "work.started",
        "work.blocked",
        "work.submitted",
        "ext.missionweaveprotocol.core.schedule_disclosed",
    ],
)
def test_owner_transitions_pass_only_for_this_agent(kind: str) -> None:
    assert concerns(_event(kind, actor=ME), ME)
    assert not concerns(_event(kind, actor=OTHER), ME)


def test_renewals_pass_only_with_a_checkpoint_anyone_may_resume_from() -> None:
    assert not concerns(_event("work.progressed", actor=ME), ME)
    assert concerns(_event("work.progressed", checkpointRef="sha256:" + "1" * 64), ME)


def test_kinds_the_scheduler_does_not_read_never_pass() -> None:
    for kind in ("message.posted", "artifact.published", "mission.created", "membership.changed"):
        assert not concerns(_event(kind, actor=ME), ME)


def test_a_slim_event_keeps_only_what_the_scheduler_reads() -> None:
    lease = {"leaseId": "urn:example:lease:1", "expiresAt": "2030-01-01T00:00:00Z"}
    event = _event("work.started", actor=ME, ownershipEpoch=1, executionLease=lease)
    assert slim(event) == {
        "kind": "work.started",
        "sequence": 7,
        "workItemId": "urn:example:item:1",
        "payload": {"executionLease": {"leaseId": "urn:example:lease:1"}},
    }


def test_a_slim_authorization_keeps_exactly_the_contract_terms_the_scheduler_reads() -> None:
    contract = work_contract("Write the report", deadline="2030-01-01T00:00:00Z")
    event = _event("work.authorized", workItem={"workItemId": "x", "contract": contract})
    slimmed = slim(event)["payload"]["workItem"]["contract"]
    assert set(slimmed) == TERMS_MEMBERS and "goal" not in slimmed
    assert Terms.from_contract(slimmed) == Terms.from_contract(contract)
    revised = slim(_event("work.contract.revised", contract=contract))["payload"]["contract"]
    assert revised == slimmed
