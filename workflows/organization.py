"""``OrganizationRegistryWorkflow``: the Organization's Agent Registry and session service.

One per Organization, workflow ID ``organization_workflow_id(orgId)`` (``mwp-org-...``), on
the authority task queue. The decisions are
:class:`mwp.core.organization.service.OrganizationRegistry`'s; this shell adds what only a
workflow has: one-at-a-time Updates, a durable home for the state, continue-as-new, and notices
to subscribed Group Authorities. The Command kinds, the trust
root and the subscription protocol are documented in :mod:`mwp.core.organization.service`.

* Updates ``register_key_binding``, ``change_key_validity``, ``register_agent_card`` and
  ``open_session`` each take one signed Command as its exact wire JSON text. The validator
  decides without changing anything (a rejection never enters history); the handler decides
  again, because another Update may have changed the state in between, and applies.
* Queries ``registry_evidence``, ``session_epochs``, ``revision``, ``agent_card(agentId)``,
  ``registry_notice`` and ``organization_view``.
* Signals ``subscribe_registry(workflowId)`` / ``unsubscribe_registry(workflowId)``.

Handlers never await, so they always finish within their activation; continue-as-new still
waits for ``all_handlers_finished`` and happens only in the main loop.

Notices, subscriptions and approval notices are sealed messages (:mod:`mwp.contracts.messages`):
the registry seals each notice once per revision and opens what Missions send it against the
key its worker reports; what it cannot open is refused and counted (``organization_view``).
A run from before sealing takes messages as before, and continues as new as soon as a sealed
one arrives, so an upgraded Mission is never left waiting for a notice it can open.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from mwp.contracts.command_size import check_command_size
from mwp.contracts.errors import as_temporal_failure
from mwp.contracts.messages import (
    MISSION_APPROVED,
    REGISTRY_NOTICE,
    REGISTRY_SUBSCRIBE,
    REGISTRY_UNSUBSCRIBE,
    SEAL_MESSAGE,
    SERVICE_KEY,
    SealRequest,
    group_authority,
    registry_subscribers,
)
from mwp.contracts.metrics import CommandMetrics
from mwp.contracts.mission import mission_workflow_id
from mwp.contracts.organization import (
    QUERY_AGENT_CARD,
    QUERY_NOTICE,
    QUERY_REGISTRY_EVIDENCE,
    QUERY_REVISION,
    QUERY_SESSION_EPOCHS,
    QUERY_VIEW,
    REGISTRY_WORKFLOW_TYPE,
    SIGNAL_MISSION_APPROVED,
    SIGNAL_REGISTRY_CHANGED,
    SIGNAL_SUBSCRIBE,
    SIGNAL_UNSUBSCRIBE,
    UPDATE_FOR_KIND,
    OrganizationRegistryInput,
)
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.organization.service import (
    AGENT_CARD_REGISTER,
    KEY_BINDING_REGISTER,
    KEY_VALIDITY_CHANGE,
    SESSION_OPEN,
    OrganizationRegistry,
)
from mwp.core.trust.service_message import (
    MessageRefusedError,
    RefusalRecord,
    TrustedKey,
    open_sealed,
)
from mwp.core.wire.strict_json import encode_wire_text
from mwp.core.wire.values import format_utc
from mwp.workflows import patches
from mwp.workflows.key_work import key_work

# The failure type of a signal to a workflow that does not exist or has closed for good.
_SUBSCRIBER_GONE = "ExternalWorkflowExecutionNotFound"


@workflow.defn(name=REGISTRY_WORKFLOW_TYPE)
class OrganizationRegistryWorkflow:
    @workflow.init
    def __init__(self, input: OrganizationRegistryInput) -> None:
        self._input = input
        state = input.state or {}
        # A bad start input fails the workflow from run(), never from here: an exception in
        # the constructor would leave the run coroutine unawaited.
        self._bootstrap_error: ApplicationError | None = None
        try:
            with as_temporal_failure():
                if "registry" in state:
                    self._registry = OrganizationRegistry.from_json(state["registry"])
                else:
                    self._registry = OrganizationRegistry.bootstrap(
                        input.organization_id,
                        input.registry_service_binding,
                        session_authorities=input.session_authorities,
                    )
        except ApplicationError as exc:
            self._bootstrap_error = exc
        # Subscriber workflow ID -> highest revision already sent to it (0: none yet).
        self._subscribers: dict[str, int] = dict(state.get("subscribers", {}))
        self._sealed = workflow.patched(patches.REGISTRY_SEALED_MESSAGES.id)
        # The sealing key and sealed notices by activity (patches.REGISTRY_AUTHORITY_ACTIVITIES).
        self._key_activities = self._sealed and workflow.patched(
            patches.REGISTRY_AUTHORITY_ACTIVITIES.id
        )
        self._trusted: TrustedKey | None = None  # fetched at the start of a sealed run
        # Subscribers that subscribed sealed: their approval notices must be sealed too.
        self._sealed_subscribers: set[str] = set(state.get("sealedSubscribers", []))
        # (signal, message) to open; a run from before sealing carries them to the next run.
        self._inbound: list[tuple[str, Any]] = [tuple(m) for m in state.get("inbound", [])]
        self._refusals = RefusalRecord.from_json(state.get("refusals"))
        self._sealed_notice: tuple[int, dict[str, Any]] | None = None  # (revision, message)
        self._metrics = CommandMetrics()  # not replayed, no Command: needs no patch

    @workflow.run
    async def run(self, input: OrganizationRegistryInput) -> None:
        if self._bootstrap_error is not None:
            raise self._bootstrap_error
        if self._registry.organization_id != input.organization_id:
            raise ApplicationError("state of another Organization", non_retryable=True)
        self._show_details()
        if self._sealed:
            binding = await self._key_work(
                SERVICE_KEY,
                group_authority(input.organization_id).id,
                "the key that seals this Organization's messages",
            )
            self._trusted = TrustedKey.from_binding(binding)
        while True:
            await workflow.wait_condition(
                lambda: (
                    self._has_undelivered_notices()
                    or self._time_to_continue_as_new()
                    or (self._trusted is not None and bool(self._inbound))
                )
            )
            if self._trusted is not None and self._inbound:
                while self._inbound:
                    self._open_inbound(*self._inbound.pop(0))
                continue
            if self._has_undelivered_notices():
                await self._deliver_notices()
                continue
            # Never from inside a handler, and only once every handler has finished.
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(self._next_input())

    # --- Updates: one per registry Command kind ---------------------------------------------

    @workflow.update(name=UPDATE_FOR_KIND[KEY_BINDING_REGISTER])
    def register_key_binding(self, command: str) -> dict[str, Any]:
        return self._accept(KEY_BINDING_REGISTER, command)

    @register_key_binding.validator
    def _check_key_binding(self, command: str) -> None:
        self._check(KEY_BINDING_REGISTER, command)

    @workflow.update(name=UPDATE_FOR_KIND[KEY_VALIDITY_CHANGE])
    def change_key_validity(self, command: str) -> dict[str, Any]:
        return self._accept(KEY_VALIDITY_CHANGE, command)

    @change_key_validity.validator
    def _check_key_validity(self, command: str) -> None:
        self._check(KEY_VALIDITY_CHANGE, command)

    @workflow.update(name=UPDATE_FOR_KIND[AGENT_CARD_REGISTER])
    def register_agent_card(self, command: str) -> dict[str, Any]:
        return self._accept(AGENT_CARD_REGISTER, command)

    @register_agent_card.validator
    def _check_agent_card(self, command: str) -> None:
        self._check(AGENT_CARD_REGISTER, command)

    @workflow.update(name=UPDATE_FOR_KIND[SESSION_OPEN])
    def open_session(self, command: str) -> dict[str, Any]:
        return self._accept(SESSION_OPEN, command)

    @open_session.validator
    def _check_session(self, command: str) -> None:
        self._check(SESSION_OPEN, command)

    # --- Queries ----------------------------------------------------------------------------

    @workflow.query(name=QUERY_REGISTRY_EVIDENCE)
    def registry_evidence(self) -> dict[str, Any]:
        return self._registry.evidence_json()

    @workflow.query(name=QUERY_SESSION_EPOCHS)
    def session_epochs(self) -> dict[str, int]:
        return dict(self._registry.session_epochs)

    @workflow.query(name=QUERY_REVISION)
    def revision(self) -> int:
        return self._registry.revision

    @workflow.query(name=QUERY_AGENT_CARD)
    def agent_card(self, agent_id: str) -> dict[str, Any] | None:
        return self._registry.agent_cards.get(agent_id)

    @workflow.query(name=QUERY_NOTICE)
    def registry_notice(self) -> dict[str, Any]:
        return self._registry.notice().to_json()

    @workflow.query(name=QUERY_VIEW)
    def organization_view(self) -> dict[str, Any]:
        registry = self._registry
        return {
            "organizationId": registry.organization_id,
            "registryServiceId": registry.registry_service_id,
            "revision": registry.revision,
            "bindings": len(registry.evidence.bindings),
            "agentCards": {a: c["cardVersion"] for a, c in registry.agent_cards.items()},
            "sessionEpochs": dict(registry.session_epochs),
            "subscribers": dict(self._subscribers),
            "runId": workflow.info().run_id,
            "refusedMessages": self._refusals.to_json(),
        }

    # --- Signals ----------------------------------------------------------------------------

    @workflow.signal(name=SIGNAL_SUBSCRIBE)
    def subscribe(self, message: Any) -> None:
        if self._take_sealed(SIGNAL_SUBSCRIBE, message):
            return
        if self._sealed:
            self._refuse(REGISTRY_SUBSCRIBE, "unsealed")
        elif isinstance(message, str):
            self._subscribe(message)

    def _subscribe(self, workflow_id: str) -> None:
        # (Re)subscribing always earns the current notice, e.g. after the subscriber lost state.
        self._subscribers[workflow_id] = 0

    @workflow.signal(name=SIGNAL_UNSUBSCRIBE)
    def unsubscribe(self, message: Any) -> None:
        if self._take_sealed(SIGNAL_UNSUBSCRIBE, message):
            return
        if self._sealed:
            self._refuse(REGISTRY_UNSUBSCRIBE, "unsealed")
        elif isinstance(message, str):
            self._subscribers.pop(message, None)

    @workflow.signal(name=SIGNAL_MISSION_APPROVED)
    def mission_approved(self, message: Any) -> None:
        # Sent by a Group Authority after the approval Event was accepted; the run loop
        # delivers the new revision to every subscriber.
        if self._take_sealed(SIGNAL_MISSION_APPROVED, message):
            return
        if not self._sealed:
            self._record_approval(message)
        elif (
            isinstance(message, dict)
            and isinstance(message.get("missionId"), str)
            and mission_workflow_id(message["missionId"]) in self._subscribers
            and mission_workflow_id(message["missionId"]) not in self._sealed_subscribers
        ):
            # A Mission run from before sealing (it subscribed unsealed) reports unsealed.
            self._record_approval(message)
        else:
            self._refuse(MISSION_APPROVED, "unsealed")

    def _record_approval(self, report: Any) -> None:
        if self._registry.record_approved_mission(report["missionId"], report["ownerId"]):
            self._show_details()

    # --- sealed messages ---------------------------------------------------------------------

    def _take_sealed(self, signal: str, message: Any) -> bool:
        """Queue a sealed message for the run loop to open; True if it is one."""
        if not (isinstance(message, dict) and "signature" in message and "body" in message):
            return False
        self._inbound.append((signal, message))
        return True

    def _open_inbound(self, signal: str, message: Any) -> None:
        assert self._trusted is not None
        message_type = _MESSAGE_TYPES[signal]
        try:
            opened = open_sealed(
                message,
                self._trusted,
                message_type=message_type,
                recipient=workflow.info().workflow_id,
            )
            if message_type == REGISTRY_SUBSCRIBE:
                self._subscribe(opened.sender)
                self._sealed_subscribers.add(opened.sender)
            elif message_type == REGISTRY_UNSUBSCRIBE:
                self._subscribers.pop(opened.sender, None)
                self._sealed_subscribers.discard(opened.sender)
            else:
                mission_id, owner_id = opened.body["missionId"], opened.body["ownerId"]
                if not (isinstance(mission_id, str) and isinstance(owner_id, str)):
                    raise MessageRefusedError("malformed")
                if opened.sender != mission_workflow_id(mission_id):
                    raise MessageRefusedError("wrong-sender")  # a Mission reports only itself
                self._record_approval(opened.body)
        except MessageRefusedError as exc:
            self._refuse(message_type, exc.reason)
        except (KeyError, TypeError, ValueError):
            self._refuse(message_type, "malformed")

    def _refuse(self, message_type: str, reason: str) -> None:
        self._refusals.add(message_type, reason, self._now())
        workflow.logger.warning("refused a %s message: %s", message_type, reason)
        self._show_details()

    async def _sealed_notice_of(self, notice: dict[str, Any], revision: int) -> dict[str, Any]:
        """The notice of ``revision`` sealed for every subscriber, sealed once."""
        if self._sealed_notice is None or self._sealed_notice[0] != revision:
            organization_id = self._input.organization_id
            sealed = await self._key_work(
                SEAL_MESSAGE,
                SealRequest(
                    group_authority(organization_id).id,
                    REGISTRY_NOTICE,
                    workflow.info().workflow_id,
                    registry_subscribers(organization_id),
                    self._now(),
                    notice,
                ),
            )
            self._sealed_notice = (revision, sealed)
        return self._sealed_notice[1]

    async def _key_work(self, name: str, arg: Any, summary: str | None = None) -> dict[str, Any]:
        return await key_work(name, arg, as_activity=self._key_activities, summary=summary)

    # --- internals --------------------------------------------------------------------------

    def _now(self) -> str:
        return format_utc(workflow.now())

    def _check(self, kind: str, command: str) -> None:
        try:
            with as_temporal_failure():
                check_command_size(command)  # before it is read (mwp/contracts/command_size.py)
                try:
                    self._registry.check(kind, encode_wire_text(command), self._now())
                except MwpError:
                    raise
                except Exception as exc:
                    # A bug must not reach the caller as an untyped failure; the handler is not
                    # guarded so, because a failing workflow task there is how Temporal shows it.
                    workflow.logger.exception("registry validator failed: %s", exc)
                    raise MwpError(ErrorCode.INTERNAL_ERROR) from None
        except ApplicationError as exc:
            self._metrics.refused(exc.type or "")
            raise

    def _accept(self, kind: str, command: str) -> dict[str, Any]:
        now = self._now()
        with as_temporal_failure(now):
            decision = self._registry.check(kind, encode_wire_text(command), now)
            result = self._registry.apply(
                decision, now=now, event_id=f"urn:uuid:{workflow.uuid4()}"
            )
        self._metrics.accepted(duplicate=decision.duplicate_of is not None)
        if decision.changes_state:
            self._show_details()
        return result

    def _show_details(self) -> None:
        registry = self._registry
        agents = sum(1 for b in registry.evidence.bindings.values() if b.principal.type == "agent")
        workflow.set_current_details(
            f"**{registry.organization_id}** · revision {registry.revision}  \n"
            f"{len(registry.evidence.bindings)} signing-key bindings ({agents} of agents) · "
            f"{len(registry.agent_cards)} Agent Cards · "
            f"{len(registry.session_epochs)} agents with sessions · "
            f"{len(self._subscribers)} subscribed Group Authorities"
            + (
                f"  \n{self._refusals.total} forged or malformed messages refused"
                if self._refusals.total
                else ""
            )
        )

    def _has_undelivered_notices(self) -> bool:
        revision = self._registry.revision
        return any(sent < revision for sent in self._subscribers.values())

    def _time_to_continue_as_new(self) -> bool:
        if not self._sealed and self._inbound:
            return True  # a sealed message came: the next run opens it (and seals notices)
        info = workflow.info()
        limit = self._input.continue_as_new_after_events
        if limit is not None and info.get_current_history_length() >= limit:
            return True
        return info.is_continue_as_new_suggested()

    async def _deliver_notices(self) -> None:
        notice = self._registry.notice().to_json()
        revision = self._registry.revision
        if self._sealed:
            notice = await self._sealed_notice_of(notice, revision)
        targets = [wid for wid, sent in self._subscribers.items() if sent < revision]
        outcomes = await asyncio.gather(
            *(self._signal(wid, notice) for wid in targets), return_exceptions=True
        )
        for wid, outcome in zip(targets, outcomes, strict=True):
            if wid not in self._subscribers:
                continue  # unsubscribed while the notice was in flight
            if isinstance(outcome, BaseException) and _is_not_found(outcome):
                del self._subscribers[wid]
                continue
            if isinstance(outcome, BaseException):
                # Marked as sent anyway, so one unreachable subscriber cannot spin this loop;
                # it gets the next notice, or the current one when it subscribes again.
                workflow.logger.warning("registry notice to %s failed: %s", wid, outcome)
            self._subscribers[wid] = max(self._subscribers[wid], revision)
        self._show_details()

    async def _signal(self, workflow_id: str, notice: dict[str, Any]) -> None:
        handle = workflow.get_external_workflow_handle(workflow_id)
        await handle.signal(SIGNAL_REGISTRY_CHANGED, notice)

    def _next_input(self) -> OrganizationRegistryInput:
        return OrganizationRegistryInput(
            organization_id=self._input.organization_id,
            registry_service_binding=self._input.registry_service_binding,
            session_authorities=self._input.session_authorities,
            continue_as_new_after_events=self._input.continue_as_new_after_events,
            state={
                "registry": self._registry.to_json(),
                "subscribers": self._subscribers,
                "sealedSubscribers": sorted(self._sealed_subscribers),
                "inbound": [list(m) for m in self._inbound],
                "refusals": self._refusals.to_json(),
            },
        )


_MESSAGE_TYPES = {
    SIGNAL_SUBSCRIBE: REGISTRY_SUBSCRIBE,
    SIGNAL_UNSUBSCRIBE: REGISTRY_UNSUBSCRIBE,
    SIGNAL_MISSION_APPROVED: MISSION_APPROVED,
}


def _is_not_found(error: BaseException) -> bool:
    return isinstance(error, ApplicationError) and error.type == _SUBSCRIBER_GONE
