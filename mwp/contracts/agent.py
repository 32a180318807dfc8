"""The agent side's contract: the ``AgentWorkflow``'s ID, type, Signal and Query names and
input, the activities it and workflow tool calls schedule on the agent's task queue, and their
inputs and results (pure: no I/O, no Temporal import, shared with workflow code).

A :class:`ToolCall` names one logical tool operation of a WorkItem: the Mission, the
WorkItem, the caller's Ownership Epoch, a logical operation ID chosen by the capability, the
registered tool's name and its JSON arguments. The agent worker's ``run_tool`` activity
(``activities/tools.py``) derives the idempotency key from the first four with
:func:`mwp.core.idempotency.tool_key` (MWP-WRK-031), never from the Temporal activity ID,
which differs across retries and repeats after continue-as-new.

The AgentWorkflow's signals each carry one typed message (:class:`Delivery`,
:class:`SessionChange`, :class:`PreemptionRequest`, :class:`PolicyChange`) sealed with the
agent's own key (:mod:`mwp.core.trust.service_message`); ``from_body`` refuses a body of the
wrong shape with :class:`~mwp.core.trust.service_message.MessageRefusedError` ``malformed``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mwp.core.idempotency import tool_key
from mwp.core.trust.service_message import MessageRefusedError
from mwp.core.wire.values import is_safe_integer

Json = dict[str, Any]

AGENT_WORKFLOW_TYPE = "AgentWorkflow"
# From the agent's Group inboxes: a Group's verified Events in order.
SIGNAL_DELIVER = "deliver"
SIGNAL_SESSION = "session"  # a new Session Epoch of the agent
SIGNAL_PREEMPT = "preempt"
SIGNAL_SET_POLICY = "set_policy"  # a Group's weight and quota
QUERY_CURSORS = "cursors"
QUERY_PREEMPTION_REQUESTED = "preemption_requested"
QUERY_QUEUES = "queues"
QUERY_STATUS = "status"

# The activity that runs a registered tool on the owning agent's task queue.
RUN_TOOL = "mwp.agent.run_tool"

# Failure types of ``run_tool`` that no retry can fix (the retry policy lists them).
UNKNOWN_TOOL = "UnknownTool"
INVALID_TOOL_CALL = "InvalidToolCall"
TOOL_RESULT_NOT_JSON = "ToolResultNotJson"
NON_RETRYABLE_TOOL_ERRORS: tuple[str, ...] = (UNKNOWN_TOOL, INVALID_TOOL_CALL, TOOL_RESULT_NOT_JSON)

AGENT_TASK_QUEUE_PREFIX = "mwp-agent/"
_QUEUE_SAFE = re.compile(r"[^A-Za-z0-9._:/@+=-]")
_MAX_QUEUE_NAME = 200


def agent_task_queue(agent_id: str, prefix: str = AGENT_TASK_QUEUE_PREFIX) -> str:
    """The task queue of ``agent_id``'s worker: ``mwp-agent/<agent id>`` (``prefix`` names
    another of the agent's queues, e.g. a Coordinator's).

    Characters outside a conservative set are replaced by ``_``; because that (or truncating
    a very long ID) could make two IDs share a name, such names end with ``~`` and 16 hex
    digits of the ID's SHA-256, so distinct agents always get distinct queues.
    """
    if not isinstance(agent_id, str) or not agent_id:
        raise ValueError("agent_id must be a non-empty string")
    safe = _QUEUE_SAFE.sub("_", agent_id)
    name = prefix + safe
    if safe != agent_id or len(name) > _MAX_QUEUE_NAME:
        digest = hashlib.sha256(agent_id.encode("utf-8")).hexdigest()[:16]
        name = f"{name[: _MAX_QUEUE_NAME - 17]}~{digest}"
    return name


@dataclass
class ToolCall:
    """One logical tool operation, as a workflow schedules it (the activity's input).

    ``args`` and ``kwargs`` must be JSON; ``kwargs`` may not name ``idempotency_key``: the
    activity passes the derived key itself to a tool that accepts one.
    """

    mission_id: str
    work_item_id: str
    ownership_epoch: int
    op_id: str
    tool: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """The idempotency key: ``tool_key`` of Mission, WorkItem, Ownership Epoch, op ID."""
        return tool_key(self.mission_id, self.work_item_id, self.ownership_epoch, self.op_id)


# The Worker Scheduler's workflow (AgentWorkflow) and the activities it runs on the agent's
# own task queue, hosted by the agent worker process that holds the agent's key.
ACCEPT_OFFER = "mwp.agent.accept_offer"
RUN_CAPABILITY = "mwp.agent.run_capability"
DISCLOSE_SCHEDULE = "mwp.agent.disclose_schedule"
# A local activity of the AgentWorkflow: the binding of the key its signals are sealed with.
SIGNING_KEY = "mwp.agent.signing_key"


def agent_workflow_id(agent_id: str) -> str:
    """The AgentWorkflow of ``agent_id``: ``agent:<agent id>``."""
    if not isinstance(agent_id, str) or not agent_id:
        raise ValueError("agent_id must be a non-empty string")
    return f"agent:{agent_id}"


@dataclass
class OfferAcceptance:
    """``work.accept_offer`` for an admitted offer (the ``accept_offer`` activity's input)."""

    group_id: str
    mission_id: str
    work_item_id: str
    offer_id: str
    contract_version: int
    session_epoch: int
    schedule_estimate: dict[str, Any] | None = None  # disclosed with the acceptance


@dataclass
class ScheduleUpdate:
    """A material change of a waiting item's schedule (the ``disclose_schedule`` input)."""

    group_id: str
    mission_id: str
    work_item_id: str
    ownership_epoch: int
    session_epoch: int
    schedule_estimate: dict[str, Any]


@dataclass
class ExecutionOrder:
    """What the Worker Scheduler dispatches to a slot (the capability activity's input)."""

    agent_id: str
    session_epoch: int
    group_id: str
    mission_id: str
    work_item_id: str
    ownership_epoch: int
    resume_from: str | None = None
    lease_seconds: int = 60


@dataclass
class ExecutionOutcome:
    """How a run ended: ``submitted``, ``blocked``, ``preempted``, ``failed``, ``fenced`` or
    ``not_started``; the lease it ran under and what the Authority said."""

    status: str
    lease_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentInput:
    agent_id: str
    card_version: int
    capabilities: dict[str, list[str]]  # capability ID -> versions served
    slots: int
    session_epoch: int
    lease_seconds: int = 60
    mean_duration_seconds: int = 600
    weights: dict[str, int] = field(default_factory=dict)  # Group -> organization weight
    quotas: dict[str, int] = field(default_factory=dict)
    # Continue as new after this many rounds of the loop as well as when Temporal suggests it
    # (0: only then); tests set a small number to see a rollover.
    rounds_per_run: int = 0
    # Carried across continue-as-new: the ``sentAt`` of the last policy applied per Group (an
    # older one is a replay) and the signals refused so far (a RefusalRecord's JSON).
    policy_sent_at: dict[str, str] = field(default_factory=dict)
    refused_signals: dict[str, Any] | None = None


# --- the sealed signals ----------------------------------------------------------------------


def _malformed() -> MessageRefusedError:
    return MessageRefusedError("malformed")


def _members(body: Mapping[str, Any], names: frozenset[str]) -> None:
    if set(body) != names:
        raise _malformed()


def _text(body: Mapping[str, Any], name: str, *, empty: bool = False) -> str:
    value = body[name]
    if not isinstance(value, str) or (not value and not empty):
        raise _malformed()
    return value


def _count(value: object, least: int) -> int:
    if not isinstance(value, int) or not is_safe_integer(value) or value < least:
        raise _malformed()
    return value


def _object(value: object) -> Json:
    if not isinstance(value, dict):
        raise _malformed()
    return value


@dataclass(frozen=True)
class Delivery:
    """``deliver``: one Group's next verified Events (slimmed by the inbox) and the Cursor after
    them, to apply only on top of ``held`` (the Cursor the Scheduler held when they were read).
    """

    MESSAGE: ClassVar[str] = "agent-deliver"
    MEMBERS: ClassVar[frozenset[str]] = frozenset(
        {"groupId", "missionId", "events", "held", "cursor"}
    )

    group_id: str
    mission_id: str  # "" until the inbox has read the Group's founding Event
    events: list[Json]
    held: Json | None
    cursor: Json

    def body(self) -> Json:
        return {
            "groupId": self.group_id,
            "missionId": self.mission_id,
            "events": self.events,
            "held": self.held,
            "cursor": self.cursor,
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Delivery:
        _members(body, cls.MEMBERS)
        events = body["events"]
        if not isinstance(events, list) or not all(_is_event(e) for e in events):
            raise _malformed()
        held = body["held"]
        return cls(
            _text(body, "groupId"),
            _text(body, "missionId", empty=True),
            events,
            None if held is None else _object(held),
            _object(body["cursor"]),
        )


def _is_event(event: object) -> bool:
    """The members the Scheduler reads of a slimmed Event, of the right types."""
    return (
        isinstance(event, dict)
        and isinstance(event.get("kind"), str)
        and is_safe_integer(event.get("sequence"))
        and isinstance(event.get("payload"), dict)
        and isinstance(event.get("workItemId"), str | None)
    )


@dataclass(frozen=True)
class SessionChange:
    """``session``: the agent worker opened this Session; later runs act under it."""

    MESSAGE: ClassVar[str] = "agent-session"

    session_epoch: int

    def body(self) -> Json:
        return {"sessionEpoch": self.session_epoch}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> SessionChange:
        _members(body, frozenset({"sessionEpoch"}))
        return cls(_count(body["sessionEpoch"], 0))


@dataclass(frozen=True)
class PreemptionRequest:
    """``preempt``: stop this running item at its next safe checkpoint."""

    MESSAGE: ClassVar[str] = "agent-preempt"

    group_id: str
    work_item_id: str

    def body(self) -> Json:
        return {"groupId": self.group_id, "workItemId": self.work_item_id}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PreemptionRequest:
        _members(body, frozenset({"groupId", "workItemId"}))
        return cls(_text(body, "groupId"), _text(body, "workItemId"))


@dataclass(frozen=True)
class PolicyChange:
    """``set_policy``: the Organization's weight (1 or more) of a Group for this agent, and its
    quota of slots (``None``: all)."""

    MESSAGE: ClassVar[str] = "agent-set-policy"

    group_id: str
    weight: int
    quota: int | None = None

    def body(self) -> Json:
        return {"groupId": self.group_id, "weight": self.weight, "quota": self.quota}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PolicyChange:
        _members(body, frozenset({"groupId", "weight", "quota"}))
        quota = body["quota"]
        return cls(
            _text(body, "groupId"),
            _count(body["weight"], 1),
            None if quota is None else _count(quota, 0),
        )
