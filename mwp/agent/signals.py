"""What an agent's own processes signal its AgentWorkflow, sealed with the agent's key.

Temporal does not say who sent a signal, so the agent worker (its inboxes and Sessions) and
the operator's CLI (preemption, policy) seal each message with the agent's own signing key for
the agent's workflow ``agent:<agent id>``; the workflow opens it against the key the worker
hosting it holds and refuses anything else (see ``workflows/agent.py``). Tests use the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mwp.client import Identity
from mwp.contracts.agent import (
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
from mwp.core.trust.service_message import seal
from mwp.core.wire.values import format_utc

Json = dict[str, Any]
Message = Delivery | SessionChange | PreemptionRequest | PolicyChange

SIGNAL_OF: dict[type[Any], str] = {
    Delivery: SIGNAL_DELIVER,
    SessionChange: SIGNAL_SESSION,
    PreemptionRequest: SIGNAL_PREEMPT,
    PolicyChange: SIGNAL_SET_POLICY,
}


@dataclass(frozen=True)
class SchedulerSignals:
    """Seals the messages of one agent (``identity`` is the agent's own) for its workflow."""

    identity: Identity

    @property
    def agent_id(self) -> str:
        return self.identity.principal.id

    @property
    def workflow_id(self) -> str:
        return agent_workflow_id(self.agent_id)

    def sealed(self, message: Message, *, recipient: str | None = None) -> Json:
        """``message`` sealed for the agent's workflow (or ``recipient``). ``sentAt`` has
        microseconds: the workflow orders policy changes and preemptions by it."""
        return seal(
            message.MESSAGE,
            sender=self.agent_id,
            recipient=recipient or self.workflow_id,
            sent_at=format_utc(datetime.now(UTC)),
            body=message.body(),
            key_id=self.identity.key_id,
            key=self.identity.key,
        )

    def signal(self, message: Message) -> tuple[str, Json]:
        """The signal name and its one argument: ``handle.signal(*signals.signal(message))``."""
        return SIGNAL_OF[type(message)], self.sealed(message)
