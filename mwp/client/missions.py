"""Missions from the client SDK: create one, send it Commands, read its state.

>>> missions = MissionClient(client, "urn:mwp:organization:acme")
>>> mission = await missions.create(ada, objective="Ship the report", ...)
>>> result = await mission.send(coordinator, "work.authorize", {"contract": contract},
...                             session_epoch=1, work_item_id=item_id)
>>> result["receipt"]["lastSequence"], [e["kind"] for e in result["events"]]

Each Command is signed by the sending :class:`~mwp.client.Identity` and decided by the
Mission's Group Authority (its MissionWorkflow) as a Temporal Update. The handle fills in the
envelope members the Authority checks (Group ID, current Membership and Coordinator Epochs)
from the Mission's current view, so callers only name the payload; a rejection is a typed
:class:`~mwp.core.errors.MwpError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from mwp.client import ClientError, Identity, MwpClient, new_id
from mwp.client.context_packages import offer_context_package
from mwp.client.limits import command_wire, server_limits_as_mwp_errors
from mwp.client.override_grants import GRANT_KIND, CooperationOverride, granted_id
from mwp.client.review import (
    approve_payload,
    changes_payload,
    rejection_payload,
    review_record,
    signed_approval,
)
from mwp.contracts.errors import raising_mwp_errors
from mwp.contracts.messages import group_authority
from mwp.contracts.mission import (
    MISSION_TASK_TIMEOUT,
    MISSION_WORKFLOW_TYPE,
    QUERY_EPOCHS,
    QUERY_EVENTS_THIS_RUN,
    QUERY_MISSION,
    QUERY_SEQUENCE,
    QUERY_WORK_ITEM,
    SUMMARY_CHARS,
    UPDATE_COMMAND,
    MissionInput,
    mission_workflow_id,
)
from mwp.contracts.names import MISSION_OWNER, ORGANIZATION_ID
from mwp.contracts.work_item import QUERY_WORK_ITEM as QUERY_CHILD_VIEW
from mwp.contracts.work_item import WORK_ITEM_FAILED, work_item_workflow_id
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.cooperation_limits import CooperationLimits
from mwp.core.group.kinds import COORDINATOR_KINDS
from mwp.core.group.resource_usage import RECORD_KIND, ResourceUsage
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import signing_hash
from mwp.core.wire.values import format_utc

# How often a Command whose Update the server aborted (``WorkflowNotReady``) is resent.
NOT_READY_ATTEMPTS = 10
# How long a send keeps answering a Group's BACKPRESSURE (a rollover takes a fraction of a
# second; a log far behind its mirror may take longer) before it raises the error.
BACKPRESSURE_PATIENCE_SECONDS = 30.0

T = TypeVar("T")


def in_seconds(seconds: int) -> str:
    return format_utc(datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=seconds))


@dataclass
class MissionHandle:
    """One Mission: its Group Authority's workflow and the Group it decides for."""

    client: MwpClient
    mission_id: str
    group_id: str

    @property
    def workflow_id(self) -> str:
        return mission_workflow_id(self.mission_id)

    async def send(
        self,
        identity: Identity,
        kind: str,
        payload: Mapping[str, Any],
        *,
        session_epoch: int | None = None,
        work_item_id: str | None = None,
        conversation_id: str | None = None,
        expected_revision: int | None = None,
        as_coordinator: bool | None = None,
        action_id: str | None = None,
        epochs: Mapping[str, Any] | None = None,
        override_grant_id: str | None = None,
    ) -> dict[str, Any]:
        """Sign ``kind`` with ``payload`` as ``identity`` and have the Authority decide it.

        The signer's Membership and Coordinator epochs come from ``epochs`` (what
        :meth:`epochs` returned earlier) or else from a query first. ``override_grant_id``
        cites a Cooperation Override Grant (see :meth:`grant_cooperation_override`)."""
        membership_epoch = coordinator_epoch = None
        if identity.principal.type != "service":
            if epochs is None:
                epochs = await self.epochs(identity.principal.id)
            membership_epoch = epochs["membershipEpoch"]
            coordinator = epochs["coordinator"] or {}
            coordinating = (
                as_coordinator
                if as_coordinator is not None
                else identity.principal.type == "agent"
                and kind in COORDINATOR_KINDS
                and coordinator.get("agentId") == identity.principal.id
            )
            if coordinating:
                coordinator_epoch = coordinator.get("coordinatorEpoch")
        command = identity.command(
            kind,
            payload,
            group_id=self.group_id,
            session_epoch=session_epoch if identity.principal.type == "agent" else None,
            membership_epoch=membership_epoch,
            coordinator_epoch=coordinator_epoch,
            work_item_id=work_item_id,
            conversation_id=conversation_id,
            expected_revision=expected_revision,
            action_id=action_id,
            cooperation_override_grant_id=override_grant_id,
        )
        return await self.send_signed(command)

    async def send_signed(self, command: Mapping[str, Any]) -> dict[str, Any]:
        """Send an already signed Command (exact bytes: its JCS form).

        A Mission whose workflow completed (it closed, and the retention window for retries
        is over: docs/operations.md) refuses it with ``INVALID_STATE_TRANSITION``."""
        try:
            return await resending_until_decided(
                lambda: self.client.send_command(self.workflow_id, UPDATE_COMMAND, command)
            )
        except ClientError as exc:
            closed = await _closed_mission(self.client, self.mission_id)
            if closed is None:
                raise
            raise closed from exc

    async def view(self) -> dict[str, Any]:
        value: dict[str, Any] = await self.client.query(self.workflow_id, QUERY_MISSION)
        return value

    async def epochs(self, principal_id: str) -> dict[str, Any]:
        """``{membershipEpoch, coordinator: {agentId, coordinatorEpoch}}`` for signing."""
        value: dict[str, Any] = await self.client.query(
            self.workflow_id, QUERY_EPOCHS, principal_id
        )
        return value

    async def work_item(self, work_item_id: str) -> dict[str, Any]:
        """The WorkItem's full view. The Mission holds it until the item settles; an item
        settled in an earlier run of the Mission is read from its WorkItemWorkflow's result."""
        value: dict[str, Any] = await self.client.query(
            self.workflow_id, QUERY_WORK_ITEM, work_item_id
        )
        final = value.get("finalView")
        if final is None:
            return value
        return await settled_work_item_view(self.client, final["workflowId"])

    async def offer_context_package(
        self, coordinator: Identity, work_item_id: str, **options: Any
    ) -> dict[str, Any]:
        """A signed Context Package for offering ``work_item_id`` (its view's contract Events,
        how each of its dependencies stands and the input Artifacts the Group published), to
        carry in a ``work.offer`` payload as ``contextPackage``; ``options`` go to
        :func:`offer_context_package`."""
        view = await self.work_item(work_item_id)
        published = {a["contentHash"] for a in (await self.view()).get("artifacts", [])}
        dependencies = [
            await self.work_item(d) for d in view["contract"].get("dependencyWorkItemIds", [])
        ]
        return offer_context_package(
            view,
            coordinator,
            published_artifacts=published,
            dependencies=dependencies,
            **options,
        )

    async def accept_result(
        self,
        coordinator: Identity,
        work_item_id: str,
        *,
        session_epoch: int,
        results: Mapping[str, str] | None = None,
        comments: str | None = None,
        review_evidence_ids: Sequence[str] = (),
    ) -> dict[str, Any]:
        """``work.accept_result`` with a review record citing, per criterion, the Evidence of
        the item's Submission (``results``: criterion -> result, default ``passed``)."""
        view = await self.work_item(work_item_id)
        payload: dict[str, Any] = {"review": review_record(view, results)}
        if comments:
            payload["comments"] = comments
        if review_evidence_ids:
            payload["reviewEvidenceIds"] = list(review_evidence_ids)
        return await self.send(
            coordinator,
            "work.accept_result",
            payload,
            session_epoch=session_epoch,
            work_item_id=work_item_id,
        )

    async def reject_result(
        self,
        coordinator: Identity,
        work_item_id: str,
        *,
        session_epoch: int,
        reason: str,
        results: Mapping[str, str],
        comments: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Reject the submitted result (``work.fail``; the item is then ``failed``, to be
        offered again) with a review naming the criteria that did not pass."""
        view = await self.work_item(work_item_id)
        return await self.send(
            coordinator,
            "work.fail",
            rejection_payload(view, reason, results, comments),
            session_epoch=session_epoch,
            work_item_id=work_item_id,
        )

    async def approve(
        self, approver: Identity, *, comments: str = "", conditions: Sequence[str] = ()
    ) -> dict[str, Any]:
        """``mission.approve`` of the submitted revision and Artifact set, carrying the
        Approval signed by ``approver`` (the MissionOwner)."""
        approval = signed_approval(
            await self.view(), approver, comments=comments, conditions=conditions
        )
        return await self.send(approver, "mission.approve", approve_payload(approval))

    async def request_changes(
        self, approver: Identity, reason: str, *, conditions: Sequence[str] = ()
    ) -> dict[str, Any]:
        """``mission.request_changes`` of the submitted revision: the MissionOwner's signed
        decision ``changes_requested``, ``reason`` in its comments; the Mission is active again."""
        approval = signed_approval(
            await self.view(),
            approver,
            comments=reason,
            conditions=conditions,
            decision="changes_requested",
        )
        return await self.send(approver, "mission.request_changes", changes_payload(approval))

    async def sequence(self) -> int:
        value: int = await self.client.query(self.workflow_id, QUERY_SEQUENCE)
        return value

    async def events_this_run(self, after_sequence: int = 0) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = await self.client.query(
            self.workflow_id, QUERY_EVENTS_THIS_RUN, after_sequence
        )
        return value

    def work_item_workflow_id(self, work_item_id: str) -> str:
        return work_item_workflow_id(self.mission_id, work_item_id)

    async def record_usage(
        self,
        owner: Identity,
        work_item_id: str,
        usage: ResourceUsage,
        *,
        session_epoch: int,
        ownership_epoch: int | None = None,
        lease_id: str | None = None,
        action_id: str | None = None,
    ) -> dict[str, Any]:
        """``resource_usage_record`` by the WorkItem's owner: charges ``usage`` to the item,
        its parent WorkItems and the Mission, or refuses it whole (``BUDGET_EXCEEDED``). The
        Ownership Epoch and Execution Lease default to the item's current ones."""
        if ownership_epoch is None or lease_id is None:
            view = await self.work_item(work_item_id)
            ownership_epoch = ownership_epoch or view.get("ownershipEpoch")
            lease_id = lease_id or (view.get("executionLease") or {}).get("leaseId")
        payload: dict[str, Any] = {"ownershipEpoch": ownership_epoch, "delta": usage.delta()}
        if lease_id is not None:  # none: the item is not active, which the Authority says
            payload["leaseId"] = lease_id
        return await self.send(
            owner,
            RECORD_KIND,
            payload,
            session_epoch=session_epoch,
            work_item_id=work_item_id,
            action_id=action_id,
        )

    async def grant_cooperation_override(
        self, approver: Identity, grant: CooperationOverride, *, session_epoch: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """``policy.grant_cooperation_override`` by the MissionOwner or Organization policy:
        the grant's ID (for the target's ``override_grant_id``) and the Update result. (An
        agent is refused as not entitled, once its ``session_epoch`` lets it be heard.)"""
        result = await self.send(
            approver, GRANT_KIND, grant.payload(self.mission_id), session_epoch=session_epoch
        )
        return granted_id(result, self.group_id), result

    async def create_child(
        self,
        coordinator: Identity,
        work_item_id: str,
        *,
        session_epoch: int,
        objective: str,
        child_coordinator_agent_id: str,
        definition_of_done: Sequence[Mapping[str, Any]],
        budget: Mapping[str, Any],
        deadline: str,
        failure_policy: str = "block",
        child_mission_id: str | None = None,
        child_group_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[MissionHandle, dict[str, Any]]:
        """``mission.create_child`` by this Mission's Coordinator: promotes ``work_item_id`` to
        a child Mission with its own Group (started by the Authority); the Coordinator becomes
        the child's MissionOwner. The child's approval later verifies the WorkItem."""
        child_mission_id = child_mission_id or new_id()
        child_group_id = child_group_id or new_id()
        payload = {
            "childMissionId": child_mission_id,
            "childGroupId": child_group_id,
            "objective": objective,
            "definitionOfDone": list(definition_of_done),
            "budget": dict(budget),
            "deadline": deadline,
            "coordinatorAgentId": child_coordinator_agent_id,
            "failurePolicy": failure_policy,
            **(extra or {}),
        }
        result = await self.send(
            coordinator,
            "mission.create_child",
            payload,
            session_epoch=session_epoch,
            work_item_id=work_item_id,
            as_coordinator=True,
        )
        return MissionHandle(self.client, child_mission_id, child_group_id), result


class MissionClient:
    """Missions of one Organization."""

    def __init__(
        self,
        client: MwpClient,
        organization_id: str,
        *,
        authority: Principal | None = None,
        updates_per_run: int | None = None,
        mirror_task_queue: str | None = None,
        snapshot_capacity: int | None = None,
        closed_retention_seconds: int | None = None,
        cooperation_limits: CooperationLimits | None = None,
    ) -> None:
        self.client = client
        # The Organization's runaway-control limits for every Mission created here (and its
        # child Missions); None: the defaults.
        self.cooperation_limits = cooperation_limits
        # How long a closed Mission keeps answering retries before its workflow completes
        # (default: the Command freshness window plus its skew; tests shorten it).
        self.closed_retention_seconds = closed_retention_seconds
        # Packed snapshot bytes past which the Group takes no new WorkItems (tests lower it).
        self.snapshot_capacity = snapshot_capacity
        self.organization_id = organization_id
        self.authority = authority or group_authority(organization_id)
        self.updates_per_run = updates_per_run
        # Where the Group Event log mirror runs (default: the authority worker's queue).
        self.mirror_task_queue = mirror_task_queue

    def mission(self, mission_id: str, group_id: str) -> MissionHandle:
        return MissionHandle(self.client, mission_id, group_id)

    async def create(
        self,
        owner: Identity,
        *,
        objective: str,
        coordinator_agent_id: str,
        definition_of_done: Sequence[Mapping[str, Any]],
        budget: Mapping[str, Any],
        deadline: str,
        mission_id: str | None = None,
        group_id: str | None = None,
        follow_up_to: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[MissionHandle, dict[str, Any]]:
        """``mission.create`` by the human ``owner``: starts the Mission's Group Authority.

        With ``follow_up_to`` it is ``mission.create_follow_up``, linked to that approved
        Mission of the same owner (corrections and remediation, spec 7.1)."""
        if owner.principal.type != "human":
            raise ClientError("a root Mission's MissionOwner is a human")
        mission_id = mission_id or new_id()
        group_id = group_id or new_id()
        payload = {
            "missionId": mission_id,
            "objective": objective,
            "definitionOfDone": list(definition_of_done),
            "budget": dict(budget),
            "deadline": deadline,
            "coordinatorAgentId": coordinator_agent_id,
            **(extra or {}),
        }
        kind = "mission.create"
        if follow_up_to is not None:
            kind, payload["followUpToMissionId"] = "mission.create_follow_up", follow_up_to
        command = owner.command(kind, payload, group_id=group_id)
        result = await self.create_signed(command)
        return self.mission(mission_id, group_id), result

    async def create_signed(self, command: Mapping[str, Any]) -> dict[str, Any]:
        """Start the Group Authority of a signed ``mission.create`` and have it decide.

        A Command over ``MAX_COMMAND_BYTES`` is refused unsent and starts nothing."""
        text = command_wire(command)
        mission_id = command["payload"]["missionId"]
        start_input = MissionInput(
            organization_id=self.organization_id, authority=self.authority.to_json()
        )
        if self.updates_per_run is not None:
            start_input.updates_per_run = self.updates_per_run
        start_input.mirror_task_queue = self.mirror_task_queue
        if self.snapshot_capacity is not None:
            start_input.snapshot_capacity = self.snapshot_capacity
        if self.closed_retention_seconds is not None:
            start_input.closed_retention_seconds = self.closed_retention_seconds
        if self.cooperation_limits is not None:
            start_input.cooperation_limits = self.cooperation_limits.to_json()
        temporal = self.client.temporal
        summary = mission_summary(command["payload"])

        async def send() -> dict[str, Any]:
            # A with-start operation is single-use: a resend needs a new one.
            operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                MISSION_WORKFLOW_TYPE,
                start_input,
                id=mission_workflow_id(mission_id),
                task_queue=self.client.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                # A closed Mission's workflow is never started again: its ID stays its own.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                static_summary=summary,
                task_timeout=MISSION_TASK_TIMEOUT,
                # Set at start, so the Mission is listed as its Organization's and its owner's
                # from the first moment, with no workflow change (the Mission never upserts them).
                search_attributes=TypedSearchAttributes(
                    [
                        *organization_attribute(self.organization_id).search_attributes,
                        *owner_attribute(command).search_attributes,
                    ]
                ),
            )
            try:
                with raising_mwp_errors(), server_limits_as_mwp_errors():
                    result: dict[str, Any] = await temporal.execute_update_with_start_workflow(
                        UPDATE_COMMAND,
                        text,
                        start_workflow_operation=operation,
                        id=signing_hash(command),
                        result_type=dict,
                    )
            except WorkflowAlreadyStartedError as exc:
                closed = await _closed_mission(self.client, mission_id)
                if closed is None:
                    raise
                raise closed from exc
            finally:
                _read_start_error(operation)
            return result

        return await resending_until_decided(send)


OWNER_ATTRIBUTE_CHARS = 255  # well inside Temporal's 2 KB per Keyword value


def organization_attribute(organization_id: str) -> TypedSearchAttributes:
    """The search attribute naming the Organization whose Group Authority a Mission is."""
    return TypedSearchAttributes([SearchAttributePair(ORGANIZATION_ID, organization_id)])


def owner_attribute(command: Mapping[str, Any]) -> TypedSearchAttributes:
    """The search attribute naming the MissionOwner: the human signing ``mission.create``. A
    Command with no usable actor ID gets none (the Authority refuses it in any case), nor does
    one longer than a visibility store keeps (the console then finds it as it did before)."""
    actor = command.get("actor")
    owner = actor.get("id") if isinstance(actor, Mapping) else None
    if not isinstance(owner, str) or not 0 < len(owner) <= OWNER_ATTRIBUTE_CHARS:
        return TypedSearchAttributes([])
    return TypedSearchAttributes([SearchAttributePair(MISSION_OWNER, owner)])


def mission_summary(payload: Mapping[str, Any]) -> str:
    """The Temporal UI's summary of a Mission: its objective (a Mission has no title)."""
    text = f"Mission: {payload.get('objective') or payload['missionId']}"
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


async def _closed_mission(client: MwpClient, mission_id: str) -> MwpError | None:
    """The typed error for a Command to a Mission whose workflow completed; None if the
    workflow is running or unknown (the caller's own error then stands)."""
    handle = client.temporal.get_workflow_handle(mission_workflow_id(mission_id))
    try:
        status = (await handle.describe()).status
    except RPCError:
        return None
    if status in (None, WorkflowExecutionStatus.RUNNING):
        return None
    # Not retryable: the Mission is approved, cancelled or failed, and stays so. A retry of a
    # Command it accepted got its receipt during the retention window; a new one has no use.
    return MwpError(
        ErrorCode.INVALID_STATE_TRANSITION,
        f"Mission {mission_id} is closed (its workflow is {status.name.lower()})",
        retryable=False,
    )


async def settled_work_item_view(client: MwpClient, workflow_id: str) -> dict[str, Any]:
    """A settled WorkItem's full final view from its workflow: the result of a verified one,
    the failure's details of a failed one, the ``work_item`` query of a cancelled one."""
    try:
        view: dict[str, Any] = await client.workflow_result(workflow_id)
        return view
    except WorkflowFailureError as exc:
        cause = exc.cause
        if (
            isinstance(cause, ApplicationError)
            and cause.type == WORK_ITEM_FAILED
            and cause.details
            and isinstance(cause.details[0], dict)
        ):
            view = cause.details[0]
            return view
        cancelled: dict[str, Any] = await client.query(workflow_id, QUERY_CHILD_VIEW)
        return cancelled


def _read_start_error(operation: WithStartWorkflowOperation[Any, Any]) -> None:
    """Mark the error of a start that failed as read. The SDK keeps it in the operation, and
    an unread one is logged when the operation is collected, from inside whatever code runs
    then (on Python 3.11 that once made pytest's next module import raise ``SystemError``)."""
    started = operation._workflow_handle
    if started.done() and not started.cancelled():
        started.exception()


def workflow_not_ready(error: BaseException) -> bool:
    """Whether the server aborted an Update because the workflow task processing it failed.

    It happens, for instance, when a signal (a WorkItem's timer report, a registry notice)
    lands while the task that accepts the Update and continues the Group as new is in flight:
    the server refuses that task's completion and drops the Update. Likewise the server's
    ``UnprocessedUpdate`` rejection: the server did not find the task whose completion
    answered the Update, and the next task ended without it. Nothing was applied, so
    resending the byte-equal Command is safe (if it had been, its receipt comes back).
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RPCError) and current.status == RPCStatusCode.FAILED_PRECONDITION:
            details = current.grpc_status.details
            if any(d.type_url.endswith(".WorkflowNotReadyFailure") for d in details):
                return True
        if isinstance(current, ApplicationError) and current.type == "UnprocessedUpdate":
            return True
        current = current.__cause__
    return False


async def resending_until_decided(
    send: Callable[[], Awaitable[T]],
    attempts: int = NOT_READY_ATTEMPTS,
    *,
    backpressure_seconds: float = BACKPRESSURE_PATIENCE_SECONDS,
) -> T:
    """``send()``, resent while the server reports WorkflowNotReady (short backoff) or the
    Group answers ``BACKPRESSURE`` (after its ``retryAfterMs``, for up to
    ``backpressure_seconds``). Both mean nothing was applied, so a byte-equal resend is safe."""
    delay = 0.02
    not_ready = 0
    deadline = asyncio.get_running_loop().time() + backpressure_seconds
    while True:
        try:
            return await send()
        except MwpError as exc:  # the Group's, or the server's limit on Updates in flight
            loop_time = asyncio.get_running_loop().time()
            if exc.code != ErrorCode.BACKPRESSURE or loop_time >= deadline:
                raise
            await asyncio.sleep((exc.retry_after_ms or 100) / 1000)
        except Exception as exc:
            not_ready += 1
            if not workflow_not_ready(exc) or not_ready >= attempts:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
