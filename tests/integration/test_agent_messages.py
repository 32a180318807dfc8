"""The AgentWorkflow's signals on the session's real dev server: anyone who reaches the
namespace can signal it, so each forged, misaddressed, replayed or malformed message is
refused, counted (``status`` query, current details) and changes nothing, and the Scheduler
goes on serving; the agent's own sealed messages still work."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow

from mwp.agent.ledger import ToolLedger
from mwp.agent.signals import SchedulerSignals
from mwp.cli import main
from mwp.client import Identity, MwpClient
from mwp.contracts.agent import (
    QUERY_CURSORS,
    QUERY_PREEMPTION_REQUESTED,
    QUERY_QUEUES,
    QUERY_STATUS,
    SIGNAL_DELIVER,
    SIGNAL_PREEMPT,
    SIGNAL_SESSION,
    SIGNAL_SET_POLICY,
    Delivery,
    PolicyChange,
    PreemptionRequest,
    SessionChange,
    agent_workflow_id,
)
from mwp.core.trust.registry import Principal
from mwp.core.trust.service_message import FORMAT, seal
from mwp.core.wire.values import format_utc
from mwp.dev.stack import BackgroundStack
from mwp.stores.objects import open_store
from mwp.workers.agent import build_agent_worker, start_scheduler
from mwp.workflows.patches import AGENT_SEALED_SIGNALS
from tests.integration import runtime_agent
from tests.integration.gateway_agents import AGENTS_NAMESPACE
from tests.integration.missions_helper import eventually, new_mission
from tests.integration.test_agent_runtime import (
    agent_runtime,
    effects,
    has_checkpoint,
    settled_runs,
    wait_for_state,
)
from tests.integration.test_mission_workflow import current_details

__all__ = ["effects"]  # the runtime tests' fixture, used below

Json = dict[str, Any]


def sealed_at(identity: Identity, message: Any, sent_at: datetime, **members: Any) -> Json:
    """``message`` sealed with ``identity``'s key, sent at ``sent_at``; ``members`` replace
    the sender, recipient, type or body before sealing (the signature still holds)."""
    signals = SchedulerSignals(identity)
    return seal(
        members.get("message_type", message.MESSAGE),
        sender=members.get("sender", signals.agent_id),
        recipient=members.get("recipient", signals.workflow_id),
        sent_at=format_utc(sent_at),
        body=members.get("body", message.body()),
        key_id=identity.key_id,
        key=identity.key,
    )


def forgeries(agent: Identity, group_id: str, item_id: str, batch: Json) -> list[Any]:
    """(signal, args, the refusal it must get) for every way of getting a message wrong."""
    now = datetime.now(UTC)
    other_key = Identity.generate(agent.principal)  # the agent's name, another key
    same_key_id = Identity(agent.principal, agent.key_id, other_key.key, agent.valid_from)
    to_other = "agent:urn:mwp:agent:someone-else"
    delivery = Delivery.from_body(batch)
    session = SessionChange(99)
    grab = PreemptionRequest(group_id, item_id)
    policy = PolicyChange(group_id, 9, 0)
    return [
        # The forms before sealing, as an old sender or anyone with a client sends them.
        (SIGNAL_DELIVER, [batch], "agent-deliver:unsealed"),
        (SIGNAL_SESSION, [99], "agent-session:unsealed"),
        (SIGNAL_PREEMPT, [group_id, item_id], "agent-preempt:unsealed"),
        (SIGNAL_SET_POLICY, [group_id, 9, 0], "agent-set-policy:unsealed"),
        # Sealed, but not by the agent's key (another key ID; its key ID with another key).
        (SIGNAL_SESSION, [sealed_at(other_key, session, now)], "agent-session:untrusted-key"),
        (SIGNAL_PREEMPT, [sealed_at(same_key_id, grab, now)], "agent-preempt:bad-signature"),
        # The agent's key, but meant for another workflow, signal or sender.
        (
            SIGNAL_DELIVER,
            [sealed_at(agent, delivery, now, recipient=to_other)],
            "agent-deliver:wrong-recipient",
        ),
        (SIGNAL_PREEMPT, [sealed_at(agent, session, now)], "agent-preempt:wrong-type"),
        (
            SIGNAL_SET_POLICY,
            [sealed_at(agent, policy, now, sender="urn:mwp:agent:mallory")],
            "agent-set-policy:wrong-sender",
        ),
        # The agent's key and the right address, but a body of the wrong shape.
        (
            SIGNAL_SESSION,
            [sealed_at(agent, session, now, body={"sessionEpoch": "99"})],
            "agent-session:malformed",
        ),
        (
            SIGNAL_DELIVER,
            [sealed_at(agent, delivery, now, body={**batch, "events": "all of them"})],
            "agent-deliver:malformed",
        ),
        # A preemption sealed long ago (replayed from this history, say).
        (
            SIGNAL_PREEMPT,
            [sealed_at(agent, grab, now - timedelta(hours=1))],
            "agent-preempt:out-of-window",
        ),
        # Garbage.
        (SIGNAL_DELIVER, ["garbage"], "agent-deliver:unsealed"),
        (SIGNAL_SESSION, [None], "agent-session:unsealed"),
        (SIGNAL_SET_POLICY, [], "agent-set-policy:unsealed"),
        (SIGNAL_PREEMPT, [{"format": FORMAT, "body": {}}], "agent-preempt:unsealed"),
    ]


async def test_forged_replayed_and_malformed_signals_are_refused_and_change_nothing(
    mwp_client: MwpClient,
    temporal_stack: BackgroundStack,
    effects: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rig = await new_mission(mwp_client)
    group = rig.mission.group_id
    (effects / "hold").touch()  # the run waits after its first checkpoint
    # A long lease: no renewal moves the log while the projections are compared.
    async with agent_runtime(rig, steps=1, lease_seconds=300) as runtime:
        item = await rig.authorize("Run through the forgeries")
        await rig.offer(item, runtime.identity)
        await eventually(lambda: has_checkpoint(rig, item), timeout=60)
        handle = runtime.scheduler

        async def caught_up() -> bool:
            queue = (await handle.query(QUERY_QUEUES)).get(group)
            return queue is not None and queue["cursor"] == await rig.mission.sequence()

        await eventually(caught_up, timeout=30)
        queues, cursors = await handle.query(QUERY_QUEUES), await handle.query(QUERY_CURSORS)
        session = (await handle.query(QUERY_STATUS))["sessionEpoch"]
        # What a forger would deliver: the item withdrawn, the Cursor moved far ahead.
        batch = {
            "groupId": group,
            "missionId": rig.mission.mission_id,
            "events": [
                {
                    "kind": "work.failed",
                    "sequence": 10**6,
                    "workItemId": item.work_item_id,
                    "payload": {},
                }
            ],
            "held": cursors[group],
            "cursor": {**cursors[group], "sequence": 10**6},
        }
        forged = forgeries(runtime.identity, group, item.work_item_id, batch)
        for signal, args, _ in forged:
            await handle.signal(signal, args=args)
        # The agent's own messages, then the same ones again (replayed from the history).
        signals = SchedulerSignals(runtime.identity)
        overtaken = signals.sealed(PolicyChange(group, 1))  # sealed first, sent last
        genuine = [
            signals.signal(PolicyChange(group, 1)),  # the weight it has: nothing moves
            signals.signal(PreemptionRequest(group, "urn:uuid:not-running")),
            signals.signal(SessionChange(0)),  # an old Session: the epoch only rises
        ]
        for signal, message in [*genuine, *genuine, (SIGNAL_SET_POLICY, overtaken)]:
            await handle.signal(signal, message)
        expected = Counter(reason for _, _, reason in forged)
        expected.update(["agent-set-policy:replayed"] * 2 + ["agent-preempt:replayed"])

        async def all_handled() -> bool:  # signals are handled in order: the last one is
            counts = (await handle.query(QUERY_STATUS))["refusedSignals"]["counts"]
            return bool(counts.get("agent-set-policy:replayed") == 2)

        await eventually(all_handled, timeout=30)
        status = await handle.query(QUERY_STATUS)
        assert Counter(status["refusedSignals"]["counts"]) == expected
        assert status["refusedSignals"]["total"] == expected.total()
        latest = status["refusedSignals"]["latest"][-1]
        assert latest.keys() == {"type", "reason", "at"}  # never the content
        # Nothing moved: queues, Cursors, Session, and the running item was not preempted.
        assert await handle.query(QUERY_QUEUES) == queues
        assert await handle.query(QUERY_CURSORS) == cursors
        assert status["sessionEpoch"] == session
        preempted = await handle.query(QUERY_PREEMPTION_REQUESTED, args=[group, item.work_item_id])
        assert preempted is False
        details = await current_details(runtime.agents, handle.id)
        assert f"{expected.total()} signals refused" in details
        argv = ["agent", "status", runtime.agent.agent_id, "--address", temporal_stack.address]
        argv += ["--namespace", AGENTS_NAMESPACE]
        assert await asyncio.to_thread(main, argv) == 0
        assert f"Refused       {expected.total()} signals (" in capsys.readouterr().out
        # The message under an unknown key made the run ask the worker for the key again.
        markers = [
            e
            async for e in handle.fetch_history_events()
            if e.HasField("marker_recorded_event_attributes")
            and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
        ]
        assert len(markers) >= 2

        # Still serving: the held run finishes, and a new offer is accepted and submitted.
        (effects / "hold").unlink()
        await wait_for_state(rig, item, "submitted")
        second = await rig.authorize("After the forgeries")
        await rig.offer(second, runtime.identity)
        await wait_for_state(rig, second, "submitted")
        status = await settled_runs(runtime, 2)
        assert [o["status"] for o in status["outcomes"]] == ["submitted", "submitted"]
        assert status["refusedSignals"]["total"] == expected.total()


async def test_a_rotated_agent_key_is_trusted_at_once_and_the_old_one_no_longer(
    mwp_client: MwpClient, tmp_path: Path
) -> None:
    organization = "urn:mwp:organization:test-rotation"  # nothing here registers or runs
    agent_id = f"urn:mwp:agent:rotating-{uuid.uuid4().hex[:8]}"
    old, new = (Identity.generate(Principal("agent", agent_id)) for _ in range(2))
    ledger = ToolLedger(open_store(str(tmp_path / "objects")))
    handle = mwp_client.temporal.get_workflow_handle(agent_workflow_id(agent_id))

    def worker(identity: Identity) -> Any:
        agent = runtime_agent.build(agent_id, identity, organization)
        return agent, build_agent_worker(mwp_client.temporal, agent, ledger, runtime=mwp_client)

    async def session_epoch() -> int:
        epoch: int = (await handle.query(QUERY_STATUS))["sessionEpoch"]
        return epoch

    try:
        agent, first = worker(old)
        async with first:
            await start_scheduler(mwp_client.temporal, agent, 1, 1)
            await eventually(lambda: _equals(session_epoch(), 1), timeout=30)
        # The agent's worker restarts with a new key: its Session is sealed with that key.
        agent, second = worker(new)
        async with second:
            await start_scheduler(mwp_client.temporal, agent, 1, 2)
            await eventually(lambda: _equals(session_epoch(), 2), timeout=30)
            await handle.signal(*SchedulerSignals(old).signal(SessionChange(3)))

            async def refused() -> bool:
                counts = (await handle.query(QUERY_STATUS))["refusedSignals"]["counts"]
                return bool(counts == {"agent-session:untrusted-key": 1})

            await eventually(refused, timeout=30)
            assert await session_epoch() == 2
    finally:
        await handle.terminate("test over")


async def _equals(value: Awaitable[Any], expected: Any) -> bool:
    return bool(await value == expected)


async def test_a_run_from_before_sealing_takes_the_upgraded_workers_session_and_rolls_over(
    mwp_client: MwpClient, effects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = workflow.patched

    def patched(patch_id: str) -> bool:
        if patch_id == AGENT_SEALED_SIGNALS.id and workflow.info().continued_run_id is None:
            return False  # the first run: as if it had started before the upgrade
        return real(patch_id)

    monkeypatch.setattr(workflow, "patched", patched)
    rig = await new_mission(mwp_client)
    async with agent_runtime(rig) as runtime:
        handle = runtime.scheduler
        # The worker's sealed Session reached the old run, which rolled over to one that opens
        # sealed messages; the inboxes fed it from the start, and it serves.
        item = await rig.authorize("Served across the upgrade")
        await rig.offer(item, runtime.identity)
        await wait_for_state(rig, item, "submitted")
        described = await handle.describe()
        assert described.run_id != described.raw_description.workflow_execution_info.first_run_id
        status = await handle.query(QUERY_STATUS)
        assert status["sessionEpoch"] == runtime.session_epoch
        assert status["refusedSignals"]["total"] == 0
        await handle.signal(SIGNAL_SESSION, runtime.session_epoch + 1)  # unsealed: refused now

        async def refused() -> bool:
            counts = (await handle.query(QUERY_STATUS))["refusedSignals"]["counts"]
            return bool(counts == {"agent-session:unsealed": 1})

        await eventually(refused, timeout=30)
