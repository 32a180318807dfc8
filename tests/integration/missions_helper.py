"""Builders for the Group Authority's Temporal-path tests: people, a Mission, WorkItem steps.

:func:`new_crew` makes a fresh Organization on the session's dev server with a human owner, a
Coordinator agent, Worker agents and spare agents, all registered and with open sessions.
:func:`new_mission` has the owner create a Mission (update-with-start) and returns a
:class:`MissionRig`, which signs Commands with the epochs the Authority expects (read from the
Mission view unless a test overrides them) and drives WorkItems step by step.

Rejection helpers (:func:`refused`, :meth:`MissionRig.assert_refused`) insist on the typed
error *and* on the Group being unchanged: the same ``sequence`` query and the same view.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pytest

from mwp.client import Identity, MwpClient, new_id, utc_now, wire_text
from mwp.client.context_packages import needs_context_package
from mwp.client.missions import MissionClient, MissionHandle, in_seconds, resending_until_decided
from mwp.client.review import approve_payload, review_record, signed_approval
from mwp.contracts.errors import RemoteMwpError, raising_mwp_errors
from mwp.contracts.mission import UPDATE_COMMAND
from mwp.core.errors import ErrorCode
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.dev.scenario import (
    definition_of_done,
    evidence_for,
    mission_budget,
    result_artifact_hash,
    result_manifest,
    selection_basis,
    work_contract,
)
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import open_store
from tests.integration.conftest import Organization, new_organization, stack_log_location

OWNERSHIP_EXPIRED = "ext.missionweaveprotocol.core.ownership_expired"
EXECUTION_LEASE_RENEW = "ext.missionweaveprotocol.core.execution_lease_renew"


class _Current:
    """Marker: take this envelope member from the Mission's current view."""

    def __repr__(self) -> str:
        return "CURRENT"


CURRENT: Final = _Current()
Epoch = int | None | _Current


# --- waiting and refusals ------------------------------------------------------------------------


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, interval: float = 0.1
) -> None:
    """Poll ``check`` until it holds; fail the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() >= deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        await asyncio.sleep(interval)


async def refused(call: Awaitable[Any]) -> RemoteMwpError:
    """The typed error a remote Authority refused ``call`` with (fails if it was accepted)."""
    try:
        result = await call
    except RemoteMwpError as exc:
        assert exc.wire["code"] == exc.code.value  # the wire object travelled intact
        return exc
    pytest.fail(f"expected a typed MWP rejection, got a result: {str(result)[:300]}")


def event_of(result: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The (single) Event of ``kind`` in an Update result."""
    found = [e for e in result["events"] if e["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} Event in {[e['kind'] for e in result['events']]}"
    return dict(found[0])


def assert_contiguous(events: Sequence[Mapping[str, Any]], first: int = 1) -> None:
    sequences = [e["sequence"] for e in events]
    assert sequences == list(range(first, first + len(sequences))), sequences


# --- people --------------------------------------------------------------------------------------


@dataclass
class Crew:
    """An Organization with its people: every agent registered and holding an open session."""

    client: MwpClient
    organization: Organization
    owner: Identity
    coordinator: Identity
    workers: list[Identity]
    spares: list[Identity]  # agents with sessions and no role yet (e.g. a next Coordinator)
    sessions: dict[str, int] = field(default_factory=dict)

    @property
    def agents(self) -> list[Identity]:
        return [self.coordinator, *self.workers, *self.spares]

    def session(self, identity: Identity) -> int | None:
        return self.sessions.get(identity.principal.id)

    async def open_session(self, agent: Identity) -> int:
        """A new Session Epoch for ``agent`` (fences its older sessions once the Group knows)."""
        epoch = await self.organization.registry.open_session(agent.principal.id)
        self.sessions[agent.principal.id] = epoch
        return epoch


async def new_crew(client: MwpClient, *, workers: int = 2, spares: int = 0) -> Crew:
    organization = await new_organization(client)
    tag = uuid.uuid4().hex[:8]

    def agent(name: str) -> Identity:
        return Identity.generate(Principal("agent", f"urn:mwp:agent:{name}-{tag}"))

    owner = Identity.generate(Principal("human", f"urn:mwp:human:owner-{tag}"))
    crew = Crew(
        client,
        organization,
        owner,
        agent("coordinator"),
        [agent(f"worker-{n}") for n in range(1, workers + 1)],
        [agent(f"spare-{n}") for n in range(1, spares + 1)],
    )
    registry = organization.registry
    await registry.register_binding(owner)
    for each in crew.agents:
        await registry.register_agent(each, owner=owner.principal)
    for each in crew.agents:
        await crew.open_session(each)
    return crew


# --- a Mission -----------------------------------------------------------------------------------


@dataclass
class WorkItemRef:
    work_item_id: str
    contract: dict[str, Any]


@dataclass
class MissionRig:
    """One created Mission and the Crew that works on it."""

    crew: Crew
    missions: MissionClient
    mission: MissionHandle
    created: dict[str, Any]
    create_command: dict[str, Any]
    # Every Event the Updates sent through :meth:`send` (and the creation) returned, in order.
    log: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.log.extend(self.created["events"])

    @property
    def client(self) -> MwpClient:
        return self.crew.client

    @property
    def workflow_id(self) -> str:
        return self.mission.workflow_id

    # --- observing -------------------------------------------------------------------------

    async def state(self) -> tuple[int, dict[str, Any]]:
        """The Group's ``sequence`` query and its Mission view, read together."""
        return await self.mission.sequence(), await self.mission.view()

    async def assert_refused(
        self, call: Callable[[], Awaitable[Any]], code: ErrorCode
    ) -> RemoteMwpError:
        """``call()`` is refused with ``code`` and the Group's sequence and view are unchanged."""
        before = await self.state()
        error = await refused(call())
        assert error.code == code, f"expected {code.value}, got {error.code.value}: {error.wire}"
        assert await self.state() == before, "a refused Command changed the Group"
        return error

    # --- Commands --------------------------------------------------------------------------

    async def command(
        self,
        identity: Identity,
        kind: str,
        payload: Mapping[str, Any],
        *,
        session_epoch: Epoch = CURRENT,
        membership_epoch: Epoch = CURRENT,
        coordinator_epoch: Epoch = CURRENT,
        work_item_id: str | None = None,
        conversation_id: str | None = None,
        expected_revision: int | None = None,
        action_id: str | None = None,
        view: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A signed Command; ``CURRENT`` epochs come from the Crew's sessions and the view.

        The current Coordinator Epoch is attached when ``identity`` is the current Coordinator
        (as the client SDK does for the Coordinator kinds, and harmlessly for others).
        """
        principal = identity.principal
        if view is None:
            view = await self.mission.view()
        if isinstance(session_epoch, _Current):
            session_epoch = self.crew.session(identity) if principal.type == "agent" else None
        if isinstance(membership_epoch, _Current):
            membership_epoch = membership_epoch_of(view, principal.id)
        if isinstance(coordinator_epoch, _Current):
            coordinator = view.get("coordinator") or {}
            coordinator_epoch = (
                coordinator.get("coordinatorEpoch")
                if coordinator.get("agentId") == principal.id
                else None
            )
        return identity.command(
            kind,
            payload,
            group_id=self.mission.group_id,
            session_epoch=session_epoch,
            membership_epoch=membership_epoch,
            coordinator_epoch=coordinator_epoch,
            work_item_id=work_item_id,
            conversation_id=conversation_id,
            expected_revision=expected_revision,
            action_id=action_id,
        )

    async def send(
        self, identity: Identity, kind: str, payload: Mapping[str, Any], **envelope: Any
    ) -> dict[str, Any]:
        """Sign (see :meth:`command`) and send; the Update result or a typed error. The
        result's Events are appended to :attr:`log`."""
        result = await self.mission.send_signed(
            await self.command(identity, kind, payload, **envelope)
        )
        if not result["duplicate"]:
            self.log.extend(result["events"])
        return result

    async def send_wire(self, text: str, *, update_id: str | None = None) -> dict[str, Any]:
        """Send raw wire text as the ``command`` Update (a fresh Update ID unless given), so
        the Authority itself, not Temporal's Update-ID deduplication, decides it."""
        handle = self.client.temporal.get_workflow_handle(self.workflow_id)
        update = update_id or new_id()

        async def send() -> dict[str, Any]:
            with raising_mwp_errors():
                result: dict[str, Any] = await handle.execute_update(
                    UPDATE_COMMAND, text, id=update, result_type=dict
                )
            return result

        return await resending_until_decided(send)

    async def coordinate(
        self, kind: str, payload: Mapping[str, Any], **envelope: Any
    ) -> dict[str, Any]:
        return await self.send(self.crew.coordinator, kind, payload, **envelope)

    async def post(self, identity: Identity, text: str, **envelope: Any) -> dict[str, Any]:
        content = [{"type": "text", "text": text}]
        return await self.send(identity, "message.post", {"content": content}, **envelope)

    # --- WorkItem steps --------------------------------------------------------------------

    async def authorize(
        self, goal: str = "Write the report", *, dependencies: Sequence[str] = ()
    ) -> WorkItemRef:
        item = WorkItemRef(
            new_id(), work_contract(goal, deadline=in_seconds(86400), dependencies=dependencies)
        )
        result = await self.coordinate(
            "work.authorize", {"contract": item.contract}, work_item_id=item.work_item_id
        )
        assert event_of(result, "work.authorized")["workItemId"] == item.work_item_id
        return item

    async def offer(
        self,
        item: WorkItemRef,
        *agents: Identity,
        expires_at: str | None = None,
        card_version: int | None = None,
    ) -> dict[str, Any]:
        """Offer ``item`` to ``agents`` (at ``card_version`` of their Agent Cards, if given);
        the ``work.offer.created`` Event's payload."""
        candidates = [
            {"agentId": a.principal.id, "selectionBasis": selection_basis(in_seconds(60))}
            for a in agents
        ]
        if card_version is not None:
            candidates = [{**c, "agentCardVersion": card_version} for c in candidates]
        payload: dict[str, Any] = {
            "candidates": candidates,
            "expiresAt": expires_at or in_seconds(3600),
        }
        view = await self.mission.view()
        item_view = await self.mission.work_item(item.work_item_id)
        if needs_context_package(view, item_view, [a.principal.id for a in agents]):
            # A newcomer (to the Group, or to the item) is handed the item's signed Context
            # Package, published by the offer.
            payload["contextPackage"] = await self.mission.offer_context_package(
                self.crew.coordinator, item.work_item_id
            )
        result = await self.coordinate("work.offer", payload, work_item_id=item.work_item_id)
        created: dict[str, Any] = event_of(result, "work.offer.created")["payload"]
        return created

    async def accept(self, worker: Identity, item: WorkItemRef, offer_id: str) -> int:
        """Accept an offer; the Ownership Epoch won."""
        result = await self.send(
            worker,
            "work.accept_offer",
            {"offerId": offer_id, "contractVersion": item.contract["contractVersion"]},
            work_item_id=item.work_item_id,
        )
        epoch: int = event_of(result, "work.offer.accepted")["payload"]["owner"]["ownershipEpoch"]
        return epoch

    async def start(
        self, worker: Identity, item: WorkItemRef, epoch: int, *, lease_seconds: int | None = None
    ) -> dict[str, Any]:
        """Start under a new Execution Lease; that lease."""
        payload: dict[str, Any] = {"ownershipEpoch": epoch}
        if lease_seconds is not None:
            payload["leaseSeconds"] = lease_seconds
        result = await self.send(worker, "work.start", payload, work_item_id=item.work_item_id)
        lease: dict[str, Any] = event_of(result, "work.started")["payload"]["executionLease"]
        return lease

    def submission(self, item: WorkItemRef, epoch: int, lease_id: str) -> dict[str, Any]:
        return {
            "ownershipEpoch": epoch,
            "leaseId": lease_id,
            "artifactHashes": [result_artifact_hash(item.work_item_id, item.contract["goal"])],
            "evidence": evidence_for(item.contract, item.work_item_id),
        }

    async def publish(
        self, worker: Identity, item: WorkItemRef, epoch: int, lease_id: str
    ) -> dict[str, Any]:
        """``artifact.publish`` of the item's result, its manifest signed by ``worker``."""
        manifest = result_manifest(
            worker,
            mission_id=self.mission.mission_id,
            group_id=self.mission.group_id,
            work_item_id=item.work_item_id,
            text=item.contract["goal"],
            created_at=utc_now(),
        )
        return await self.send(
            worker,
            "artifact.publish",
            {"ownershipEpoch": epoch, "leaseId": lease_id, "manifest": manifest},
            work_item_id=item.work_item_id,
        )

    async def submit(
        self, worker: Identity, item: WorkItemRef, epoch: int, lease_id: str
    ) -> dict[str, Any]:
        """Publish the result Artifact (unless the Group has it), then ``work.submit`` it."""
        submission = self.submission(item, epoch, lease_id)
        published = {a["contentHash"] for a in (await self.mission.view()).get("artifacts", [])}
        if not set(submission["artifactHashes"]) <= published:
            await self.publish(worker, item, epoch, lease_id)
        return await self.send(worker, "work.submit", submission, work_item_id=item.work_item_id)

    async def accept_result(self, item: WorkItemRef) -> dict[str, Any]:
        """Accept the result with a review citing each criterion's submitted Evidence."""
        review = review_record(await self.mission.work_item(item.work_item_id))
        return await self.coordinate(
            "work.accept_result",
            {"comments": "Evidence reviewed.", "review": review},
            work_item_id=item.work_item_id,
        )

    async def approval_payload(self, approver: Identity | None = None) -> dict[str, Any]:
        """``mission.approve`` of the submitted revision, carrying the signed Approval."""
        approval = signed_approval(await self.mission.view(), approver or self.crew.owner)
        return approve_payload(approval)

    async def approve(self, approver: Identity | None = None) -> dict[str, Any]:
        approver = approver or self.crew.owner
        return await self.send(approver, "mission.approve", await self.approval_payload(approver))

    async def complete(self, item: WorkItemRef, worker: Identity) -> list[dict[str, Any]]:
        """Offer, accept, start, submit and accept the result of ``item``: the Events."""
        events: list[dict[str, Any]] = []
        offers = await self.offer(item, worker)
        epoch = await self.accept(worker, item, offers["offers"][0]["offerId"])
        lease = await self.start(worker, item, epoch)
        events += (await self.submit(worker, item, epoch, lease["leaseId"]))["events"]
        events += (await self.accept_result(item))["events"]
        return events

    # --- the Group Event log ----------------------------------------------------------------

    async def verified_log(self) -> tuple[GroupEventLog, int]:
        """The Group Event log once it holds every Event accepted so far, verified whole (six
        stages, the chain), and the last sequence it covers."""
        through = await self.mission.sequence()
        log = GroupEventLog(open_store(stack_log_location()), self.mission.group_id)
        evidence = RegistryEvidence.from_json(await self.crew.organization.registry.evidence_json())

        async def mirrored() -> bool:
            return log.last_sequence() >= through

        await eventually(mirrored, timeout=20)
        verdict = log.verify_all(evidence)
        assert verdict.ok and verdict.last_sequence == through, verdict
        return log, through

    # --- sessions --------------------------------------------------------------------------

    async def renew_session(self, agent: Identity) -> int:
        """Open a new session for ``agent`` and wait until this Group has learned of it.

        Registry notices reach the Group asynchronously. The probe is a Command under the new
        Session Epoch with an impossible ``expectedRevision``: while the Group still holds the
        old epoch it is ``AUTH_STALE_SESSION``; once it knows the new one the probe fails a
        later check instead. Either way nothing is applied.
        """
        epoch = await self.crew.open_session(agent)

        async def known() -> bool:
            probe = await self.command(
                agent,
                "message.post",
                {"content": [{"type": "text", "text": "probe"}]},
                expected_revision=2**40,
            )
            error = await refused(self.mission.send_signed(probe))
            return error.code in PAST_THE_SESSION_CHECK

        await eventually(known)
        return epoch


# A probe refused with one of these passed the Session check (a schema refusal, or a transient
# one, says nothing: a probe that never reached the check once made a wait return at once).
PAST_THE_SESSION_CHECK = frozenset(
    {ErrorCode.MEMBERSHIP_REQUIRED, ErrorCode.MEMBERSHIP_STALE, ErrorCode.REVISION_CONFLICT}
)


def membership_epoch_of(view: Mapping[str, Any], member_id: str) -> int | None:
    for membership in view.get("memberships", []):
        if membership["member"]["id"] == member_id and membership.get("state") != "ended":
            epoch: int = membership["membershipEpoch"]
            return epoch
    return None


def create_command(crew: Crew, *, mission_id: str | None = None) -> dict[str, Any]:
    """The owner's signed ``mission.create`` for a new Mission of ``crew``."""
    group_id = new_id()
    payload = {
        "missionId": mission_id or new_id(),
        "objective": "Deliver the quarterly report",
        "definitionOfDone": definition_of_done("The report is written and checked."),
        "budget": mission_budget(),
        "deadline": in_seconds(7 * 86400),
        "coordinatorAgentId": crew.coordinator.principal.id,
    }
    return crew.owner.command("mission.create", payload, group_id=group_id)


async def new_mission(
    client: MwpClient,
    crew: Crew | None = None,
    *,
    updates_per_run: int | None = None,
    workers: int = 2,
    spares: int = 0,
    mirror_task_queue: str | None = None,
    snapshot_capacity: int | None = None,
) -> MissionRig:
    """A fresh Crew (unless given) and a Mission its owner created (update-with-start)."""
    crew = crew or await new_crew(client, workers=workers, spares=spares)
    missions = MissionClient(
        client,
        crew.organization.organization_id,
        updates_per_run=updates_per_run,
        mirror_task_queue=mirror_task_queue,
        snapshot_capacity=snapshot_capacity,
    )
    command = create_command(crew)
    created = await missions.create_signed(command)
    mission = missions.mission(command["payload"]["missionId"], command["groupId"])
    return MissionRig(crew, missions, mission, created, command)


async def admit_workers(rig: MissionRig) -> None:
    """Give every Worker of the Crew an active ``worker`` Membership."""
    for worker in rig.crew.workers:
        await rig.coordinate(
            "membership.change",
            {"memberId": worker.principal.id, "role": "worker", "reason": "staffing"},
        )


def raw(command: Mapping[str, Any]) -> str:
    """The exact wire text of a signed Command."""
    return wire_text(command)
