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
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from mwp.contracts.errors import as_temporal_failure
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
from mwp.core.wire.values import format_utc

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

    @workflow.run
    async def run(self, input: OrganizationRegistryInput) -> None:
        if self._bootstrap_error is not None:
            raise self._bootstrap_error
        if self._registry.organization_id != input.organization_id:
            raise ApplicationError("state of another Organization", non_retryable=True)
        self._show_details()
        while True:
            await workflow.wait_condition(
                lambda: self._has_undelivered_notices() or self._time_to_continue_as_new()
            )
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
        }

    # --- Signals ----------------------------------------------------------------------------

    @workflow.signal(name=SIGNAL_SUBSCRIBE)
    def subscribe(self, workflow_id: str) -> None:
        # (Re)subscribing always earns the current notice, e.g. after the subscriber lost state.
        self._subscribers[workflow_id] = 0

    @workflow.signal(name=SIGNAL_UNSUBSCRIBE)
    def unsubscribe(self, workflow_id: str) -> None:
        self._subscribers.pop(workflow_id, None)

    @workflow.signal(name=SIGNAL_MISSION_APPROVED)
    def mission_approved(self, report: dict[str, str]) -> None:
        # Sent only by Group Authorities on the authority task queue, after the approval
        # Event was accepted; the run loop delivers the new revision to every subscriber.
        if self._registry.record_approved_mission(report["missionId"], report["ownerId"]):
            self._show_details()

    # --- internals --------------------------------------------------------------------------

    def _now(self) -> str:
        return format_utc(workflow.now())

    def _check(self, kind: str, command: str) -> None:
        with as_temporal_failure():
            try:
                self._registry.check(kind, command.encode(), self._now())
            except MwpError:
                raise
            except Exception as exc:
                # A bug must not reach the caller as an untyped failure; the handler is not
                # guarded so, because a failing workflow task there is how Temporal shows it.
                workflow.logger.exception("registry validator failed: %s", exc)
                raise MwpError(ErrorCode.INTERNAL_ERROR) from None

    def _accept(self, kind: str, command: str) -> dict[str, Any]:
        now = self._now()
        with as_temporal_failure(now):
            decision = self._registry.check(kind, command.encode(), now)
            result = self._registry.apply(
                decision, now=now, event_id=f"urn:uuid:{workflow.uuid4()}"
            )
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
        )

    def _has_undelivered_notices(self) -> bool:
        revision = self._registry.revision
        return any(sent < revision for sent in self._subscribers.values())

    def _time_to_continue_as_new(self) -> bool:
        info = workflow.info()
        limit = self._input.continue_as_new_after_events
        if limit is not None and info.get_current_history_length() >= limit:
            return True
        return info.is_continue_as_new_suggested()

    async def _deliver_notices(self) -> None:
        notice = self._registry.notice().to_json()
        revision = self._registry.revision
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
            state={"registry": self._registry.to_json(), "subscribers": self._subscribers},
        )


def _is_not_found(error: BaseException) -> bool:
    return isinstance(error, ApplicationError) and error.type == _SUBSCRIBER_GONE
