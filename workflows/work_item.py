"""WorkItemWorkflow: one per WorkItem, a child of its MissionWorkflow.

It owns the item's durable timers (offer expiry, start-by deadline, Execution Lease expiry,
bounded blocked lease). The Mission signals every accepted transition of the item with its
summary (ID, state, revision, Ownership Epoch; the full view is the Mission's ``work_item``
query), its search attributes and the timers the new state needs (an Event that changes none
of these but the revision, such as a published Artifact, is not sent); when one falls due the
child reports it to the Mission, which decides what it causes and records the Events. Stale
reports are harmless: each timer carries the token of the grant it belongs to, and the
Authority ignores tokens that are no longer current. The child ends when its item can change no
more, with the item's full final view: the Mission keeps only a short record of a settled
item, so this is where clients (and the Temporal UI) read it. A verified item's workflow
completes with the view as its result; a failed one's fails with the view in the failure's
details (once its Mission closed: until then a new offer may revive the item); a cancelled
one's ends Cancelled when its Mission asks, and its ``work_item`` query still answers.

Anyone who reaches the namespace can signal this workflow, so a transition is a sealed message
(:mod:`mwp.contracts.messages`) opened against the key its start input names; anything else is
refused, counted in the details and the ``refused_messages`` query, and changes nothing.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import ApplicationError

from mwp.contracts.messages import WORK_ITEM_TRANSITION
from mwp.contracts.mission import SIGNAL_TIMER_FIRED
from mwp.contracts.names import CAPABILITY, MISSION_ID, OWNER, WORK_ITEM_ID, WORK_ITEM_STATE
from mwp.contracts.work_item import (
    QUERY_REFUSED_MESSAGES,
    QUERY_TIMERS,
    QUERY_WORK_ITEM,
    SIGNAL_TRANSITION,
    WORK_ITEM_FAILED,
    WORK_ITEM_WORKFLOW_TYPE,
    WorkItemInput,
)
from mwp.core.kinds import FINAL_WORK_STATES
from mwp.core.trust.service_message import (
    MessageRefusedError,
    RefusalRecord,
    TrustedKey,
    open_sealed,
)
from mwp.core.wire.values import format_utc, instant_to_datetime, parse_timestamp
from mwp.workflows import patches


def _due(timer: dict[str, str]) -> datetime:
    return instant_to_datetime(parse_timestamp(timer["due_at"]).instant)


@workflow.defn(name=WORK_ITEM_WORKFLOW_TYPE)
class WorkItemWorkflow:
    @workflow.init
    def __init__(self, input: WorkItemInput) -> None:
        self._input = input
        self._view = input.view
        self._final = input.final
        self._timers = list(input.timers)
        self._reported: set[tuple[str, str]] = set()
        self._changed = False
        self._attributes = dict(input.search_attributes)
        self._trusted = TrustedKey.from_binding(input.trusted_key) if input.trusted_key else None
        self._refusals = RefusalRecord.from_json(input.refusals)
        self._cancel_follows = input.cancel_follows
        self._cancel_requested = False

    @workflow.run
    async def run(self, input: WorkItemInput) -> dict[str, Any]:
        self._publish(input.search_attributes)
        while not self._ended():
            try:
                await self._step(input)
            except asyncio.CancelledError:
                # Anyone who reaches the namespace can ask; only the item's own cancellation
                # (a sealed transition) ends this workflow, so the request is only noted.
                self._cancel_requested = True
        return await self._end()

    def _ended(self) -> bool:
        """The item can change no more: final, or failed once its Mission closed (the Mission
        then sends the failed item's full final view)."""
        state = self._view.get("state")
        return state in FINAL_WORK_STATES or (state == "failed" and self._final is not None)

    async def _step(self, input: WorkItemInput) -> None:
        if workflow.info().is_continue_as_new_suggested():
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(
                WorkItemInput(
                    input.mission_workflow_id,
                    input.mission_id,
                    input.work_item_id,
                    self._view,
                    [t for t in self._timers if (t["kind"], t["token"]) not in self._reported],
                    self._attributes,
                    self._final,
                    trusted_key=input.trusted_key,
                    refusals=self._refusals.to_json() if self._refusals.total else None,
                    cancel_follows=self._cancel_follows,
                )
            )
        pending = [t for t in self._timers if (t["kind"], t["token"]) not in self._reported]
        self._changed = False
        if not pending:
            await workflow.wait_condition(lambda: self._changed)
            return
        nearest = min(pending, key=_due)
        delay = _due(nearest) - workflow.now()
        if delay > timedelta(0):
            try:
                await workflow.wait_condition(lambda: self._changed, timeout=delay)
                return  # the item changed: recompute its timers
            except TimeoutError:
                pass
        key = (nearest["kind"], nearest["token"])
        self._reported.add(key)
        try:
            await workflow.get_external_workflow_handle(input.mission_workflow_id).signal(
                SIGNAL_TIMER_FIRED,
                {
                    "work_item_id": input.work_item_id,
                    "kind": nearest["kind"],
                    "token": nearest["token"],
                },
            )
        except asyncio.CancelledError:
            # A cancellation request may have withdrawn the report: report it again (the
            # Authority ignores a timer it already acted on).
            self._reported.discard(key)
            raise

    async def _end(self) -> dict[str, Any]:
        """The item's full final view as the result; a failed item's workflow fails with it
        in the details and a cancelled one's ends Cancelled, so the Temporal UI shows how the
        item ended."""
        final = self._final or self._view
        state = self._view.get("state")
        if state == "verified" or not workflow.patched(patches.WORK_ITEM_ENDS_AS_ITEM.id):
            return final
        if state == "failed":
            reason = (final.get("failure") or {}).get("reason") or "no reason given"
            raise ApplicationError(
                f"WorkItem {self._input.work_item_id} failed: {reason}"[:1000],
                final,
                type=WORK_ITEM_FAILED,
                non_retryable=True,
            )
        if not self._cancel_follows:
            return final  # a Mission run from before this change never asks
        # Temporal ends a workflow Cancelled only when a cancellation was requested: the
        # Mission asks right after the transition that cancelled the item.
        while not self._cancel_requested:
            try:
                await workflow.wait_condition(lambda: self._cancel_requested)
            except asyncio.CancelledError:
                self._cancel_requested = True
        raise asyncio.CancelledError(f"WorkItem {self._input.work_item_id} was cancelled")

    @workflow.signal(name=SIGNAL_TRANSITION)
    def transition(self, message: Any) -> None:
        if self._trusted is None:
            # Started by a Mission run from before sealing: taken as it comes, as before.
            update = message["body"] if "signature" in message and "body" in message else message
            if update.get("cancelFollows") is True:
                self._cancel_follows = True
            self._apply(update["view"], update.get("final"), update["timers"], update)
            return
        try:
            opened = open_sealed(
                message,
                self._trusted,
                message_type=WORK_ITEM_TRANSITION,
                recipient=workflow.info().workflow_id,
                senders=frozenset({self._input.mission_workflow_id}),
            )
            view, final, timers = _transition(opened.body)
            if view.get("revision", 0) < self._view.get("revision", 0):
                # A replayed older transition: the Mission always sends the newest state.
                raise MessageRefusedError("out-of-order")
        except MessageRefusedError as exc:
            self._refuse(exc.reason)
            return
        except (KeyError, TypeError, ValueError):
            self._refuse("malformed")
            return
        if opened.body.get("cancelFollows") is True:
            self._cancel_follows = True
        self._apply(view, final, timers, opened.body)

    def _apply(
        self,
        view: dict[str, Any],
        final: dict[str, Any] | None,
        timers: list[dict[str, str]],
        update: dict[str, Any],
    ) -> None:
        self._view = view
        self._final = final or self._final
        self._timers = list(timers)
        self._changed = True
        self._publish(update.get("searchAttributes", {}))

    def _refuse(self, reason: str) -> None:
        self._refusals.add(WORK_ITEM_TRANSITION, reason, format_utc(workflow.now()))
        workflow.logger.warning("refused a %s message: %s", WORK_ITEM_TRANSITION, reason)
        self._show_details(self._attributes.get("Owner"))

    @workflow.query(name=QUERY_REFUSED_MESSAGES)
    def refused_messages(self) -> dict[str, Any]:
        return self._refusals.to_json()

    @workflow.query(name=QUERY_WORK_ITEM)
    def work_item(self) -> dict[str, Any]:
        return self._final or self._view

    @workflow.query(name=QUERY_TIMERS)
    def timers(self) -> list[dict[str, str]]:
        return self._timers

    def _publish(self, attributes: dict[str, str]) -> None:
        if attributes:
            self._attributes = dict(attributes)
        keys = {key.name: key for key in (WORK_ITEM_STATE, OWNER, CAPABILITY)}
        updates: list[SearchAttributeUpdate[Any]] = [
            WORK_ITEM_ID.value_set(self._input.work_item_id),
            MISSION_ID.value_set(self._input.mission_id),
        ]
        if attributes:
            # An empty value (e.g. no live Owner once the owner is fenced) clears the
            # attribute: a stale Owner must not stay listed.
            updates += [
                key.value_set(attributes[name]) if attributes.get(name) else key.value_unset()
                for name, key in keys.items()
            ]
        workflow.upsert_search_attributes(updates)
        self._show_details(attributes.get("Owner"))

    def _show_details(self, owner: str | None) -> None:
        refused = self._refusals.total
        workflow.set_current_details(
            f"**{self._view.get('state')}** · {owner or 'no owner'}"
            + (f"  \n{refused} forged or malformed messages refused" if refused else "")
        )


def _transition(
    body: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, str]]]:
    """The parts of an opened transition; KeyError/TypeError/ValueError if malformed."""
    view, final, timers = body["view"], body.get("final"), body["timers"]
    attributes = body.get("searchAttributes", {})
    if not isinstance(view, dict) or not isinstance(view.get("state"), str):
        raise TypeError("view")
    if final is not None and not isinstance(final, dict):
        raise TypeError("final")
    if not isinstance(attributes, dict) or not all(isinstance(v, str) for v in attributes.values()):
        raise TypeError("searchAttributes")
    if not isinstance(timers, list):
        raise TypeError("timers")
    for timer in timers:
        if not isinstance(timer, dict) or not all(
            isinstance(timer[k], str) for k in ("kind", "token", "due_at")
        ):
            raise TypeError("timer")
        parse_timestamp(timer["due_at"])
    return view, final, timers
