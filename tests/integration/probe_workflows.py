"""Small workflows that stand in for future Group Authorities in integration tests.

Kept apart from the test modules so the workflow sandbox imports nothing but this file.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mwp.contracts.messages import (
        REGISTRY_NOTICE,
        REGISTRY_SUBSCRIBE,
        REGISTRY_UNSUBSCRIBE,
        SEAL_MESSAGE,
        SERVICE_KEY,
        SealRequest,
        group_authority,
        registry_subscribers,
    )
    from mwp.contracts.organization import (
        SIGNAL_REGISTRY_CHANGED,
        SIGNAL_SUBSCRIBE,
        SIGNAL_UNSUBSCRIBE,
        organization_workflow_id,
    )
    from mwp.core.organization.service import RegistrySubscription
    from mwp.core.trust.service_message import MessageRefusedError, TrustedKey, open_sealed
    from mwp.core.wire.values import format_utc


@workflow.defn
class RegistrySubscriberProbe:
    """Subscribes to an Organization's registry and keeps the newest notice it can open, as a
    MissionWorkflow does."""

    @workflow.init
    def __init__(self, organization_id: str) -> None:
        self._organization_id = organization_id
        self._subscription = RegistrySubscription(organization_id)
        self._received = 0
        self._refused = 0
        self._done = False
        self._trusted: TrustedKey | None = None
        self._pending: list[Any] = []

    @workflow.run
    async def run(self, organization_id: str) -> int:
        signer = group_authority(organization_id).id
        binding = await workflow.execute_local_activity(
            SERVICE_KEY, signer, result_type=dict, start_to_close_timeout=timedelta(seconds=10)
        )
        self._trusted = TrustedKey.from_binding(binding)
        for notice in self._pending:
            self._open(notice)
        registry_id = organization_workflow_id(organization_id)
        registry = workflow.get_external_workflow_handle(registry_id)
        await registry.signal(SIGNAL_SUBSCRIBE, await self._seal(REGISTRY_SUBSCRIBE, registry_id))
        await workflow.wait_condition(lambda: self._done)
        await registry.signal(
            SIGNAL_UNSUBSCRIBE, await self._seal(REGISTRY_UNSUBSCRIBE, registry_id)
        )
        return self._received

    async def _seal(self, message_type: str, recipient: str) -> Any:
        request = SealRequest(
            group_authority(self._organization_id).id,
            message_type,
            workflow.info().workflow_id,
            recipient,
            format_utc(workflow.now()),
            {},
        )
        return await workflow.execute_local_activity(
            SEAL_MESSAGE, request, result_type=dict, start_to_close_timeout=timedelta(seconds=10)
        )

    def _open(self, notice: Any) -> None:
        assert self._trusted is not None
        try:
            opened = open_sealed(
                notice,
                self._trusted,
                message_type=REGISTRY_NOTICE,
                recipient=registry_subscribers(self._organization_id),
            )
        except MessageRefusedError:
            self._refused += 1
            return
        self._subscription.offer(opened.body)

    @workflow.signal(name=SIGNAL_REGISTRY_CHANGED)
    def registry_changed(self, notice: Any) -> None:
        self._received += 1
        if self._trusted is None:
            self._pending.append(notice)
        else:
            self._open(notice)

    @workflow.signal
    def finish(self) -> None:
        self._done = True

    @workflow.query
    def seen(self) -> dict[str, Any]:
        subscription = self._subscription
        evidence = subscription.evidence
        return {
            "received": self._received,
            "refused": self._refused,
            "revision": subscription.revision,
            "sessionEpochs": subscription.notice.session_epochs if subscription.notice else {},
            "keyIds": sorted(evidence.bindings) if evidence else [],
        }


@workflow.defn
class QueryBufferProbe:
    """Waits for signals and answers how many came: a workflow to hold a task of."""

    def __init__(self) -> None:
        self._pokes = 0

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._pokes > 1)
        return self._pokes

    @workflow.signal
    def poke(self) -> None:
        self._pokes += 1

    @workflow.query
    def pokes(self) -> int:
        return self._pokes
