"""The AgentWorkflow's sealed messages: what the agent's processes seal opens against the
agent's key as the same typed message; a body of the wrong shape is ``malformed``."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.agent.signals import SchedulerSignals
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
)
from mwp.core.trust.registry import Principal
from mwp.core.trust.service_message import MessageRefusedError, TrustedKey, open_sealed

AGENT = Identity.generate(Principal("agent", "urn:mwp:agent:writer"))
EVENT = {"kind": "work.offer.created", "sequence": 3, "workItemId": "urn:uuid:1", "payload": {}}
MESSAGES: list[tuple[Any, str]] = [
    (Delivery("g", "", [EVENT], None, {"groupId": "g", "sequence": 3}), SIGNAL_DELIVER),
    (SessionChange(4), SIGNAL_SESSION),
    (PreemptionRequest("g", "urn:uuid:1"), SIGNAL_PREEMPT),
    (PolicyChange("g", 2, None), SIGNAL_SET_POLICY),
    (PolicyChange("g", 1, 0), SIGNAL_SET_POLICY),
]


@pytest.mark.parametrize(("message", "signal"), MESSAGES, ids=lambda m: type(m).__name__)
def test_a_sealed_message_opens_as_itself_for_the_agents_workflow(
    message: Any, signal: str
) -> None:
    name, sealed = SchedulerSignals(AGENT).signal(message)
    assert name == signal
    opened = open_sealed(
        sealed,
        TrustedKey.from_binding(AGENT.binding()),
        message_type=message.MESSAGE,
        recipient="agent:urn:mwp:agent:writer",
        senders=frozenset({"urn:mwp:agent:writer"}),
    )
    assert type(message).from_body(opened.body) == message


@pytest.mark.parametrize(
    ("message", "body"),
    [
        (SessionChange, {"sessionEpoch": "4"}),
        (SessionChange, {"sessionEpoch": True}),
        (SessionChange, {"sessionEpoch": -1}),
        (SessionChange, {"sessionEpoch": 4, "more": 1}),
        (PreemptionRequest, {"groupId": "g"}),
        (PreemptionRequest, {"groupId": "", "workItemId": "i"}),
        (PolicyChange, {"groupId": "g", "weight": 0, "quota": None}),
        (PolicyChange, {"groupId": "g", "weight": 1, "quota": -1}),
        (PolicyChange, {"groupId": "g", "weight": 1.5, "quota": None}),
        (Delivery, {"groupId": "g", "missionId": "", "events": {}, "held": None, "cursor": {}}),
        (Delivery, {"groupId": "g", "missionId": "", "events": [{}], "held": None, "cursor": {}}),
        (Delivery, {"groupId": "g", "missionId": 1, "events": [], "held": None, "cursor": {}}),
        (Delivery, {"groupId": "g", "missionId": "", "events": [], "held": [], "cursor": {}}),
        (Delivery, {"groupId": "g", "missionId": "", "events": [], "held": None}),
    ],
)
def test_a_body_of_the_wrong_shape_is_malformed(message: Any, body: dict[str, Any]) -> None:
    with pytest.raises(MessageRefusedError) as refused:
        message.from_body(body)
    assert refused.value.reason == "malformed"
