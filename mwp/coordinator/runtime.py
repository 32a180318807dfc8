"""The Coordinator runtime: the Coordinator's functions, run against its Groups through the
gateway (the default of `mwp coordinator run`).

It connects like an agent runtime (one TLS 1.3 WebSocket, HELLO with the Coordinator's key:
its Session), subscribes to every Group it is a Member of, and keeps each Group's projection:
the pure Group Authority following the signed Events the gateway delivers (so the Mission and
WorkItem views it decides on are exactly what the Authority decided). Whenever a Group moves,
and every ``TICK_SECONDS``, it asks :func:`~mwp.coordinator.reconcile.next_steps` what is due
and takes those steps, each Group in a task of its own (so one Mission's round trips do not
hold up another's): asks for the decisions of the Coordinator's functions (each call one
decision, :mod:`mwp.coordinator.decisions`: a Temporal activity under ``mwp coordinator run``,
applied only under the Coordinator Epoch it was taken under), journals plans, and signs and
sends the Commands. It then waits until the log shows a step's Events before deciding that Group
again. A Command the Authority refuses is reported and decided again at the next change; a
Group whose Coordinator is now another agent (``AUTH_STALE_COORDINATOR``) is left alone.

Hand-over: it publishes a Mission-wide Context Package whenever the Mission's plan changes or a
WorkItem is verified (``PublishHandover``), so the MissionOwner can appoint a replacement from
it; before it authorizes planned items no package carries yet, it publishes one carrying them
(its remaining plan). A runtime appointed to a Mission another Coordinator planned adopts its
WorkItems and that remaining plan (``TakeOver``) instead of calling ``plan``.

Reusable knowledge: a Coordinator that declares ``reuse`` is asked once per Mission which
Artifacts of its other Missions to import (``NeedReuse``); for each one the Group does not hold,
it asks the gateway's Knowledge Reuse Policy for the approval and sends ``artifact_import``
itself (``ImportKnowledge``, :mod:`mwp.gateway.knowledge_imports`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from mwp.agent.gateway_link import GatewayLink, GatewaySettings, GatewayUnavailableError
from mwp.agent.reconnect import Reconnect
from mwp.client.context_packages import needs_context_package, offer_context_package
from mwp.client.knowledge import import_payload
from mwp.client.review import (
    approve_payload,
    rejection_payload,
    review_record,
    signed_approval,
)
from mwp.contracts.coordinator import (
    ON_CHANGES_REQUESTED,
    ON_MESSAGE,
    ON_PROPOSAL,
    PLAN,
    REUSE,
    REVIEW,
    CoordinatorDecision,
    DecisionPolicy,
)
from mwp.contracts.errors import RemoteMwpError
from mwp.coordinator import codec
from mwp.coordinator.decisions import CurrentLink, DecisionFailedError, Decisions
from mwp.coordinator.declaration import Coordinator, Plan, Review, ReviewContext
from mwp.coordinator.journal import PlanJournal
from mwp.coordinator.performance import CITED, REGISTRY_RULE, PerformanceRecords
from mwp.coordinator.performance import RULE as PERFORMANCE_RULE
from mwp.coordinator.reconcile import (
    ApproveChild,
    Authorize,
    IdOf,
    ImportKnowledge,
    JournaledPlan,
    LogNotes,
    NeedPlan,
    NeedProposal,
    NeedReplan,
    NeedReuse,
    Offer,
    PackageRecord,
    Promote,
    PublishHandover,
    Renew,
    ReviewResult,
    Step,
    SubmitMission,
    TakeOver,
    child_payload,
    next_steps,
    owner_steps,
    package_record,
    selection_basis,
    work_item_id,
)
from mwp.coordinator.remaining_plan import RemainingItem, remaining_plan
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import GroupAuthority
from mwp.core.group.context_package import PUBLISH_KIND, PUBLISHED_KIND
from mwp.core.group.ids import derive_id
from mwp.core.group.kinds import COORDINATOR_KINDS
from mwp.core.group.knowledge import IMPORT_KIND
from mwp.core.models.websocket_frame import EventFrame
from mwp.core.organization.performance import PerformanceRecord, choose
from mwp.core.wire.values import format_utc
from mwp.gateway import MEMBER_GROUPS
from mwp.gateway.frames import Incoming

Json = dict[str, Any]
log = logging.getLogger(__name__)

TICK_SECONDS: Final = 5.0  # decide again without news: lease renewal, offers that expired
# A Group learns a new Session of this runtime from the Registry a moment after its HELLO;
# a Command it refuses meanwhile as from a stale Session is decided again after this
# (doubling up to the tick), not at the next Event of some Group, which may be far off.
SESSION_LEARNED_SECONDS: Final = 0.25
OFFER_SECONDS: Final = 3600


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class GroupProjection:
    """One Group as the Coordinator sees it: the Authority following its log."""

    group_id: str
    authority: GroupAuthority = field(default_factory=GroupAuthority)
    # Wait for the log to reach this sequence (a step's Events) before deciding again.
    awaiting: int = 0
    left: bool = False  # not coordinable from what it may read (a Coordinator admitted late)
    coordinated: bool = False  # this Coordinator held the Group once
    handed_over: bool = False  # another holds it now (said once)
    # Messages others posted, to answer once the Group is decided on (on_message).
    messages: list[Json] = field(default_factory=list)
    # What reconcile needs of the log that the views do not keep (LogNotes).
    assigned_with: str | None = None
    changes_requested_at: int | None = None
    mission_package: PackageRecord | None = None
    remaining_plan: tuple[RemainingItem, ...] = ()
    # A hand-over package the Authority refused: not sent again as it is.
    refused_package: PackageRecord | None = None
    # Content hashes whose import the policy or the Group refused: not asked again this run.
    refused_imports: set[str] = field(default_factory=set)

    @property
    def caught_up(self) -> bool:
        return self.authority.sequence >= self.awaiting

    def note(self, event: Mapping[str, Any]) -> None:
        kind, payload = event["kind"], event["payload"]
        if kind == "mission.coordinator.assigned":
            self.assigned_with = payload.get("contextPackageId")
        elif kind == "mission.changes_requested":
            self.changes_requested_at = int(event["sequence"])
        elif kind == PUBLISHED_KIND and "workItemId" not in payload["contextPackage"]:
            package = payload["contextPackage"]
            self.mission_package = package_record(package)
            try:
                self.remaining_plan = remaining_plan(package)
            except MwpError as error:
                # Taken whole or not at all: a replacement then adopts the Group's WorkItems.
                self.remaining_plan = ()
                log.warning("Group %s: %s", self.group_id, error.message)

    def notes(self) -> LogNotes:
        return LogNotes(
            self.assigned_with, self.changes_requested_at, self.mission_package, self.remaining_plan
        )

    def items(self) -> dict[str, Json]:
        views = {}
        for item_id in self.authority.work_item_ids():
            with contextlib.suppress(KeyError):
                views[item_id] = self.authority.work_item_view(item_id)
        return views


def _raise_failure(task: asyncio.Task[None]) -> None:
    """Raise what a finished decision task raised, if anything."""
    error = None if task.cancelled() else task.exception()
    if error is not None:
        raise error


class CoordinatorRuntime:
    """Coordinates every Group of ``coordinator`` reachable over ``link``."""

    def __init__(
        self,
        coordinator: Coordinator,
        link: GatewayLink,
        journal: PlanJournal,
        *,
        report: Callable[[str], None] = print,
        clock: Callable[[], datetime] = _now,
        id_of: IdOf = work_item_id,
        decisions: Decisions,
        policy: DecisionPolicy | None = None,
    ) -> None:
        self.coordinator = coordinator
        # How its functions are called: each call a decision (mwp.coordinator.decisions).
        self.decisions = decisions
        self.policy = policy or DecisionPolicy()
        self._stop = asyncio.Event()
        self.id_of = id_of  # how a plan key names its WorkItem
        self.link = link
        self.journal = journal
        self.report = report
        self.clock = clock
        self.groups: dict[str, GroupProjection] = {}
        self.changed = asyncio.Event()
        self.steps_taken = 0
        # Its own records, the fallback when the Registry's are not served: rebuilt from the
        # logs on every connection, as the projections are.
        self.performance = PerformanceRecords()
        self.registry_records: bool | None = None  # whether the gateway served them last
        self._stale_session_wait = SESSION_LEARNED_SECONDS
        # Each Group is decided in a task of its own: a Group waiting on its Commands' round
        # trips or a function's decision does not hold up another Mission's next step.
        self._deciding: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()  # changed while being decided: decided again after

    # --- the log ----------------------------------------------------------------------------

    def take(self, incoming: Incoming) -> None:
        if not isinstance(incoming.frame, EventFrame):
            return
        self.follow(incoming.value["event"])

    def follow(self, event: Mapping[str, Any]) -> None:
        group_id = str(event["groupId"])
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupProjection(group_id)
        if group.left:
            return
        if group.authority.sequence == 0 and int(event["sequence"]) > 1:
            # A Coordinator's visibility starts at 0 however late it was appointed, so only a
            # log delivered from later (a stored Cursor, a compacted log) leads here: no
            # projection can be built from it.
            group.left = True
            self.report(
                f"Group {group_id}: visible only from sequence {event['sequence']} (a "
                "stored Cursor or a compacted log); left alone"
            )
            return
        if int(event["sequence"]) == group.authority.sequence + 1:
            self.performance.follow(event)
        try:
            if group.authority.follow(event):
                group.note(event)
                self.changed.set()
                if (
                    event["kind"] == "message.posted"
                    and self.coordinator.answerer is not None
                    and event["actor"]["id"] != self.coordinator.agent_id
                ):
                    group.messages.append(dict(event))
        except ValueError:
            log.warning("Group %s: Event %s out of order; skipped", group_id, event["eventId"])

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` or the link closes."""
        self._stop = stop
        self.link.listener = self.take
        await self.link.subscribe([{"groupId": MEMBER_GROUPS, "afterSequence": 0}])
        try:
            while not stop.is_set() and not self.link.closed.is_set():
                self.changed.clear()
                for group in list(self.groups.values()):
                    if group.caught_up and not group.left:
                        self._decide_group(group)
                waits = [
                    asyncio.ensure_future(e.wait()) for e in (stop, self.changed, self.link.closed)
                ]
                try:
                    await asyncio.wait(
                        waits, timeout=TICK_SECONDS, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    for wait in waits:
                        wait.cancel()
        except BaseException:  # cancelled, or a decision failed: the others are not waited for
            for task in self._deciding.values():
                task.cancel()
            raise
        finally:
            # Each ends soon once stopped or cut off (a decision is abandoned, a send fails).
            deciding = list(self._deciding.values())
            await asyncio.gather(*deciding, return_exceptions=True)
        for task in deciding:
            _raise_failure(task)

    def _decide_group(self, group: GroupProjection) -> None:
        """Decide ``group`` in its own task, or once more after the one under way."""
        group_id = group.group_id
        running = self._deciding.get(group_id)
        if running is not None and not running.done():
            self._again.add(group_id)
            return
        if running is not None:
            _raise_failure(running)  # as the loop's own await of it would have

        def decided(task: asyncio.Task[None]) -> None:
            if group_id in self._again or task.cancelled() or task.exception() is not None:
                self._again.discard(group_id)
                self.changed.set()  # the loop decides it again, or raises what it raised

        task = asyncio.create_task(self._reconcile(group), name=f"decide {group_id}")
        task.add_done_callback(decided)
        self._deciding[group_id] = task

    # --- deciding ---------------------------------------------------------------------------

    async def _reconcile(self, group: GroupProjection) -> None:
        mission = group.authority.mission_view()
        if group.authority.epochs_of(self.coordinator.agent_id)["membershipEpoch"] is None:
            return  # its Membership is not delivered yet: a Command now would carry none
        if (mission.get("coordinator") or {}).get("agentId") != self.coordinator.agent_id:
            if group.coordinated and not group.handed_over:
                group.handed_over = True
                self.report(f"Mission {mission['missionId']}: another Coordinator took over")
            # A Group it works in, one another Coordinator coordinates now, or a child
            # Mission it owns.
            await self._take_steps(group, mission, owner_steps(mission, self.coordinator.agent_id))
            return
        group.coordinated, group.handed_over = True, False
        items = group.items()
        await self._answer_messages(group, mission, items)
        steps = next_steps(
            mission,
            items,
            self.journal.plans(group.group_id),
            coordinator_id=self.coordinator.agent_id,
            workers=self.coordinator.workers,
            session_epoch=self.link.session_epoch,
            lease_seconds=self.coordinator.lease_seconds,
            now=self.clock(),
            id_of=self.id_of,
            notes=group.notes(),
            journaled_package=self.journal.handover(group.group_id),
            refused_package=group.refused_package,
            reuses=self.coordinator.reuser is not None,
            reused=self.journal.reused(group.group_id),
            refused_imports=frozenset(group.refused_imports),
        )
        await self._take_steps(group, mission, steps)

    async def _take_steps(self, group: GroupProjection, mission: Json, steps: list[Step]) -> None:
        for step in steps:
            try:
                await self._take_step(group, mission, step)
            except RemoteMwpError as error:
                if error.code == ErrorCode.AUTH_STALE_SESSION:
                    self._decide_again_soon()
                if error.code == ErrorCode.AUTH_STALE_COORDINATOR:
                    # Its projection is behind: another Coordinator took over, or it was
                    # appointed again under a newer epoch. The next Events say which.
                    return
                self.report(
                    f"Mission {mission['missionId']}: {_name(step)} refused: "
                    f"{error.code.value} ({error.message})"
                )
                return  # decided again once the Group moves
            except MwpError as error:
                self.report(f"Mission {mission['missionId']}: {_name(step)}: {error.message}")
                return
            except DecisionFailedError as error:
                self.report(f"Mission {mission['missionId']}: {error}; nothing of it applied")
                return  # asked again (a new run of the same decision) at the next change
            except (_Abandoned, StaleDecisionError) as error:
                if isinstance(error, StaleDecisionError):
                    self.report(f"Mission {mission['missionId']}: {error}")
                return
            except Exception:
                log.exception("the Coordinator's %s failed", _name(step))
                self.report(f"Mission {mission['missionId']}: {_name(step)} failed (see the log)")
                return
            self.steps_taken += 1
            self._stale_session_wait = SESSION_LEARNED_SECONDS

    def _decide_again_soon(self) -> None:
        """Wake the loop after the current wait for the Group to learn this Session."""
        asyncio.get_running_loop().call_later(self._stale_session_wait, self.changed.set)
        self._stale_session_wait = min(self._stale_session_wait * 2, TICK_SECONDS)

    async def _take_step(self, group: GroupProjection, mission: Json, step: Step) -> None:
        coordinator = self.coordinator
        if isinstance(step, Renew):
            await self._send(
                group, "mission.renew_coordinator", {"leaseSeconds": coordinator.lease_seconds}
            )
        elif isinstance(step, NeedPlan):
            if coordinator.planner is None:
                raise MwpError(
                    ErrorCode.INVALID_COMMAND, "the Coordinator declares no plan function"
                )
            key = str(mission["missionId"])
            plan = codec.plan_of(await self._decide(group, PLAN, key, codec.planning(mission)))
            self.journal.add(group.group_id, JournaledPlan("initial", tuple(plan.items)))
            self.report(f"Mission {mission['missionId']}: planned {len(plan.items)} WorkItems")
            self.changed.set()
        elif isinstance(step, NeedReuse):
            key = str(mission["missionId"])
            context = codec.reuse(mission, self._catalog(group))
            sources = codec.sources_of(await self._decide(group, REUSE, key, context))
            self.journal.reuse(group.group_id, sources)
            self.report(
                f"Mission {mission['missionId']}: reuses {len(sources)} Artifacts of other Missions"
            )
            self.changed.set()
        elif isinstance(step, ImportKnowledge):
            await self._import(group, mission, step)
        elif isinstance(step, TakeOver):
            self.journal.add(group.group_id, step.plan)
            self.report(_takeover_line(mission, step, group.items()))
            self.changed.set()
        elif isinstance(step, PublishHandover):
            await self._publish_handover(group, step)
        elif isinstance(step, NeedReplan):
            reason = str(step.approval.get("comments", ""))
            plan = Plan([])
            if coordinator.replanner is not None:
                context = codec.changes(mission, reason, list(group.items().values()))
                key = str(step.approval["approvalId"])
                plan = codec.plan_of(await self._decide(group, ON_CHANGES_REQUESTED, key, context))
            self.journal.add(
                group.group_id, JournaledPlan(str(step.approval["approvalId"]), tuple(plan.items))
            )
            self.report(
                f"Mission {mission['missionId']}: changes requested ({reason!r}); "
                f"{len(plan.items)} more WorkItems"
            )
            self.changed.set()
        elif isinstance(step, NeedProposal):
            proposal = step.proposal
            answer = None
            if coordinator.proposals is not None:
                context = codec.proposal(mission, proposal)
                key = str(proposal["proposalId"])
                answer = codec.proposal_answer_of(
                    await self._decide(group, ON_PROPOSAL, key, context)
                )
            items = (answer,) if answer is not None else ()
            self.journal.add(
                group.group_id, JournaledPlan(str(proposal["proposalId"]), items, proposal=True)
            )
            taken = f"taken as {answer.key!r}" if answer is not None else "left open"
            self.report(
                f"Mission {mission['missionId']}: proposal {proposal.get('title')!r} {taken}"
            )
            self.changed.set()
        elif isinstance(step, Authorize):
            payload: Json = {"contract": step.contract}
            if step.proposal_id is not None:
                payload["proposalId"] = step.proposal_id
            await self._send(group, "work.authorize", payload, work_item_id=step.work_item_id)
        elif isinstance(step, Offer):
            await self._offer(group, mission, step)
        elif isinstance(step, Promote):
            await self._promote(group, mission, step)
        elif isinstance(step, ApproveChild):
            revision = mission["submission"]["missionRevision"]
            approval = signed_approval(
                mission,
                coordinator.identity,
                comments="Every WorkItem of the child Mission was reviewed by its Coordinator.",
                approval_id=derive_id(group.group_id, "child-approval", str(revision)),
                occurred_at=format_utc(self.clock()),
            )
            await self._send(group, "mission.approve", approve_payload(approval))
            self.report(f"Mission {mission['missionId']}: approved as its MissionOwner")
        elif isinstance(step, ReviewResult):
            await self._review(group, mission, step.work_item_id)
        elif isinstance(step, SubmitMission):
            await self._send(
                group, "mission.submit_for_approval", {"artifactHashes": list(step.artifact_hashes)}
            )
            self.report(f"Mission {mission['missionId']}: submitted for Approval")

    async def _publish_handover(self, group: GroupProjection, step: PublishHandover) -> None:
        identity = self.coordinator.identity
        package = {
            **step.package,
            "generatedBy": identity.principal.to_json(),
            "generatedAt": format_utc(self.clock()),
        }
        signed = identity.sign(package, "context-package")
        try:
            await self._send(group, PUBLISH_KIND, {"contextPackage": signed})
        except MwpError as error:
            if not error.retryable and error.code != ErrorCode.AUTH_STALE_COORDINATOR:
                # Refused as it is (a Group under rules from before packages refuses them
                # all): said once, not on every tick; tried again when what it cites changes.
                group.refused_package = step.record
            raise
        # Noted once the Authority took it: until the log shows it, no other is published.
        self.journal.hand_over(group.group_id, step.record)
        if step.record.remaining:
            self.report(
                f"Mission {step.package['missionId']}: hand-over Context Package "
                f"{step.record.context_package_id} (version {step.record.version}) carries "
                f"{len(step.record.remaining)} planned WorkItems before they are authorized"
            )

    def _catalog(self, asking: GroupProjection) -> list[Json]:
        """What ``reuse`` sees of the other Missions this Coordinator coordinates: the
        Artifacts published in each (an imported one is its source's to give)."""
        catalog = []
        for group in self.groups.values():
            if group is asking or group.left or group.authority.sequence == 0:
                continue
            mission = group.authority.mission_view()
            if (mission.get("coordinator") or {}).get("agentId") != self.coordinator.agent_id:
                continue
            items = group.items()
            artifacts = [
                {
                    "contentHash": a["contentHash"],
                    "artifactId": a["artifactId"],
                    "classification": a["classification"],
                    "workItemId": a["workItemId"],
                    "goal": ((items.get(a["workItemId"]) or {}).get("contract") or {}).get(
                        "goal", ""
                    ),
                }
                for a in mission.get("artifacts") or []
                if "importedFrom" not in a
            ]
            catalog.append(
                {
                    "groupId": group.group_id,
                    "missionId": mission["missionId"],
                    "objective": mission.get("objective", ""),
                    "artifacts": artifacts,
                }
            )
        return catalog

    async def _import(self, group: GroupProjection, mission: Json, step: ImportKnowledge) -> None:
        """Ask the gateway's Knowledge Reuse Policy for the approval, then send the import
        with the source's signed manifest; a refusal (the policy's or the Group's) is said
        once and not asked again in this run."""
        source = step.source
        try:
            manifest, approval = await self.link.knowledge_import(
                group.group_id, source.group_id, source.content_hash
            )
            await self._send(group, IMPORT_KIND, import_payload(manifest, approval))
        except MwpError as error:
            if not error.retryable and error.code != ErrorCode.AUTH_STALE_COORDINATOR:
                group.refused_imports.add(source.content_hash)
            raise
        self.report(
            f"Mission {mission['missionId']}: imported {source.content_hash} of Group "
            f"{source.group_id} under approval {approval['approvalId']}"
        )

    async def _answer_messages(
        self, group: GroupProjection, mission: Json, items: Mapping[str, Json]
    ) -> None:
        answerer = self.coordinator.answerer
        if not group.messages or answerer is None:
            return
        answered = self.journal.answered(group.group_id)
        by_conversation = {view.get("conversationId"): view for view in items.values()}
        while group.messages:
            event = group.messages[0]
            message = event["payload"]["message"]
            if message["messageId"] not in answered:
                work_item = by_conversation.get(event.get("conversationId"))
                try:
                    context = codec.message(mission, message, work_item)
                    key = str(message["messageId"])
                    reply = codec.reply_of(await self._decide(group, ON_MESSAGE, key, context))
                    if reply:
                        await self._send(
                            group,
                            "message.post",
                            {
                                "content": [{"type": "text", "text": reply}],
                                "references": [message["messageId"]],
                            },
                            conversation_id=event.get("conversationId"),
                        )
                except _Abandoned:
                    return
                except (DecisionFailedError, StaleDecisionError) as error:
                    self.report(f"Mission {mission['missionId']}: {error}")
                    return  # asked again at the next change
                except Exception:
                    log.exception("the Coordinator's on_message failed")
                    self.report(f"Mission {mission['missionId']}: on_message failed (see the log)")
                    return  # asked again at the next change
                self.journal.answer(group.group_id, message["messageId"])
            group.messages.pop(0)

    async def _offer(self, group: GroupProjection, mission: Json, step: Offer) -> None:
        available = format_utc(self.clock() + timedelta(seconds=60))
        capability = "@".join(step.capability)
        records, rule = await self._records(step.candidates, capability)
        chosen = choose(step.candidates, records)
        # The records decided the order, or whom to leave out, once any candidate has one.
        used = any(r.setbacks or r.counts.get("completed") for r in records.values())
        candidates = []
        for agent_id in chosen:
            record = records.get(agent_id)
            cited = record.evidence(CITED) if record is not None else []
            basis = selection_basis(step.capability, available, cited, [rule] if used else [])
            candidates.append({"agentId": agent_id, "selectionBasis": basis})
        payload: Json = {
            "candidates": candidates,
            "expiresAt": format_utc(self.clock() + timedelta(seconds=OFFER_SECONDS)),
        }
        view = group.authority.work_item_view(step.work_item_id)
        if needs_context_package(mission, view, chosen):
            published = {a["contentHash"] for a in mission.get("artifacts", [])}
            dependencies = [
                _dependency(group.authority, d)
                for d in view["contract"].get("dependencyWorkItemIds", [])
            ]
            payload["contextPackage"] = offer_context_package(
                view,
                self.coordinator.identity,
                published_artifacts=published,
                dependencies=dependencies,
            )
        await self._send(group, "work.offer", payload, work_item_id=step.work_item_id)

    async def _records(
        self, candidates: Sequence[str], capability: str
    ) -> tuple[dict[str, PerformanceRecord], str]:
        """The candidates' records and the rule that names them: the Registry's, through the
        gateway; its own when the gateway serves none (said once per change)."""
        try:
            answers = await asyncio.gather(
                *(self.link.performance_records(a, capability) for a in candidates)
            )
        except (MwpError, OSError, TimeoutError, ValueError, KeyError) as error:
            if self.registry_records is not False:
                why = error.code.value if isinstance(error, MwpError) else type(error).__name__
                self.report(
                    f"the Registry's performance records are not served ({why}); offering on "
                    "this Coordinator's own records"
                )
            self.registry_records = False
            return self.performance.records(candidates, capability), PERFORMANCE_RULE
        self.registry_records = True
        found = {r.agent_id: r for answer in answers for r in answer if r.capability == capability}
        return found, REGISTRY_RULE

    async def _promote(self, group: GroupProjection, mission: Json, step: Promote) -> None:
        """``mission.create_child``: the item runs as a child Mission with the item's budget
        and deadline; its IDs derive from the item's key, so a retry names the same child."""
        child = step.item.child
        assert child is not None
        contract = group.authority.work_item_view(step.work_item_id)["contract"]
        payload = child_payload(group.group_id, step.item, contract)
        await self._send(group, "mission.create_child", payload, work_item_id=step.work_item_id)
        self.report(
            f"Mission {mission['missionId']}: {contract['goal']!r} runs as child Mission "
            f"{payload['childMissionId']}, coordinated by {child.coordinator}"
        )

    async def _review(self, group: GroupProjection, mission: Json, work_item_id: str) -> None:
        view = group.authority.work_item_view(work_item_id)
        evidence = view.get("submissionEvidence") or []
        context = ReviewContext(
            mission,
            view,
            lambda digest: self.link.download(group.group_id, digest),
            {
                c["criterionId"]: [
                    e for e in evidence if c["criterionId"] in e.get("criterionIds", [])
                ]
                for c in view["contract"]["acceptanceCriteria"]
            },
        )
        if self.coordinator.reviewer is not None:
            # One review per submission: the item, its Ownership Epoch, when it was submitted.
            submitted = (view.get("submission") or {}).get("submittedAt")
            key = f"{work_item_id}@{view.get('ownershipEpoch')}@{submitted}"
            answer = await self._decide(
                group, REVIEW, key, codec.review(mission, view, context.evidence)
            )
            verdict = codec.review_of(answer)
        elif context.evidence_covers_every_criterion:
            verdict = Review.accept()
        else:
            verdict = Review.reject("the Evidence does not cover every criterion as passed")
        goal = view["contract"]["goal"]
        if verdict.accepted:
            payload = {"comments": verdict.comments, "review": review_record(view)}
            await self._send(group, "work.accept_result", payload, work_item_id=work_item_id)
            self.report(f"Mission {mission['missionId']}: accepted {goal!r}")
            return
        failed = (
            verdict.failed
            or [
                c
                for c, entries in context.evidence.items()
                if not entries or any(e.get("result", "passed") != "passed" for e in entries)
            ]
            or [next(iter(context.evidence))]
        )
        payload = rejection_payload(view, verdict.comments, dict.fromkeys(failed, "failed"))
        await self._send(group, "work.fail", payload, work_item_id=work_item_id)
        self.report(f"Mission {mission['missionId']}: rejected {goal!r}: {verdict.comments}")

    async def _decide(self, group: GroupProjection, handler: str, key: str, context: Json) -> Json:
        """One call of the Coordinator's ``handler``, taken as a decision under the Coordinator
        Epoch this runtime holds the Group with (its ID derives from that epoch and ``key``:
        asked again, the same decision answers). The answer is used only while that epoch is
        still this Coordinator's: one taken under an earlier epoch is not applied to a later
        one (its Commands would carry the new epoch)."""
        epoch = self._held_epoch(group)
        if epoch is None:
            raise StaleDecisionError(f"{handler}: this Coordinator no longer holds the Group")
        decision = CoordinatorDecision(
            group.group_id, self.coordinator.agent_id, epoch, handler, key, context, self.policy
        )
        answer = await self._unless_stopped(self.decisions.decide(decision))
        now = self._held_epoch(group)
        if now != epoch:
            raise StaleDecisionError(
                f"{handler} decided under Coordinator Epoch {epoch}, not applied under "
                + (f"Coordinator Epoch {now}" if now is not None else "another Coordinator")
            )
        return answer

    def _held_epoch(self, group: GroupProjection) -> int | None:
        """The Coordinator Epoch of this Coordinator's lease of the Group (None: another's)."""
        lease = group.authority.epochs_of(self.coordinator.agent_id)["coordinator"] or {}
        if lease.get("agentId") != self.coordinator.agent_id:
            return None
        return int(lease["coordinatorEpoch"])

    async def _unless_stopped(self, deciding: Awaitable[Json]) -> Json:
        """``deciding``'s answer, or :class:`_Abandoned` once the runtime stops or its link
        closes first: the decision goes on without it, and the next runtime asks for it again
        and gets its answer."""
        task = asyncio.ensure_future(deciding)
        ends = [asyncio.ensure_future(e.wait()) for e in (self._stop, self.link.closed)]
        try:
            await asyncio.wait([task, *ends], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for end in ends:
                end.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise _Abandoned
        return task.result()

    async def _send(
        self,
        group: GroupProjection,
        kind: str,
        payload: Json,
        *,
        work_item_id: str | None = None,
        conversation_id: str | None = None,
    ) -> None:
        epochs = group.authority.epochs_of(self.coordinator.agent_id)
        coordinator = epochs["coordinator"] or {}
        command = self.coordinator.identity.command(
            kind,
            payload,
            group_id=group.group_id,
            session_epoch=self.link.session_epoch,
            membership_epoch=epochs["membershipEpoch"],
            coordinator_epoch=coordinator.get("coordinatorEpoch")
            if kind in COORDINATOR_KINDS
            else None,
            work_item_id=work_item_id,
            conversation_id=conversation_id,
            issued_at=format_utc(self.clock()),
        )
        events = await self.link.command(command)
        for event in events:
            self.follow(event)
        if events:
            group.awaiting = max(group.awaiting, int(events[-1]["sequence"]))


class StaleDecisionError(Exception):
    """A decision taken under a Coordinator Epoch this Coordinator no longer holds."""


class _Abandoned(Exception):  # noqa: N818 (not an error: the runtime stopped while deciding)
    """The runtime stopped, or its link closed, while a decision was being taken."""


def _name(step: Step) -> str:
    return type(step).__name__


def _takeover_line(mission: Json, step: TakeOver, items: Mapping[str, Json]) -> str:
    states: dict[str, int] = {}
    for adopted in step.plan.adopted:
        state = str((items.get(adopted) or {}).get("state", "planned"))
        states[state] = states.get(state, 0) + 1
    counted = ", ".join(f"{n} {state}" for state, n in states.items())
    source = step.context_package_id or "no Context Package"
    return (
        f"Mission {mission['missionId']}: took over as Coordinator Epoch "
        f"{step.coordinator_epoch} from Context Package {source}; adopted "
        f"{len(step.plan.adopted)} WorkItems ({counted}) instead of planning"
    )


async def run_coordinator(
    coordinator: Coordinator,
    settings: GatewaySettings,
    state_dir: Path,
    stop: asyncio.Event,
    *,
    report: Callable[[str], None] = print,
    on_ready: Callable[[CoordinatorRuntime], None] | None = None,
    decisions: Decisions,
    current: CurrentLink | None = None,
    policy: DecisionPolicy | None = None,
) -> None:
    """Coordinate through the gateway until ``stop``, connecting again after a lost link.
    ``decisions`` calls the Coordinator's functions (``mwp.workers.coordinator`` runs each
    as a Temporal activity); ``current`` is kept pointing at the live link, through which
    those calls read Artifacts."""
    slug = coordinator.agent_id.rsplit(":", 1)[-1]
    journal = PlanJournal(state_dir / "coordinator" / slug / "plans")
    first = True
    reconnect = Reconnect()
    while not stop.is_set():
        try:
            async with GatewayLink.open(settings, coordinator.agent) as link:
                reconnect.connected()
                if current is not None:
                    current.link = link
                runtime = CoordinatorRuntime(
                    coordinator, link, journal, report=report, decisions=decisions, policy=policy
                )
                if on_ready is not None and first:
                    on_ready(runtime)
                first = False
                await runtime.run(stop)
                if link.fatal is not None:
                    report(f"the gateway ended this Session: {link.fatal.code.value}")
                    return
        except GatewayUnavailableError:
            if first:
                raise
            report("the gateway is unreachable")
        if not stop.is_set():
            wait = reconnect.next_wait()
            report(f"connecting to the gateway again in {wait:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)


def _dependency(authority: GroupAuthority, work_item_id: str) -> Json:
    """A dependency's view, or the record kept once it settled before a restore."""
    try:
        return authority.work_item_view(work_item_id)
    except KeyError:
        return authority.settled_work_item(work_item_id) or {}
