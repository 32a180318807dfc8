"""The agent side's contract: the ``AgentWorkflow``'s ID, type, Signal and Query names and
input, the activities it and workflow tool calls schedule on the agent's task queue, and their
inputs and results (pure: no I/O, no Temporal import, shared with workflow code).

A :class:`ToolCall` names one logical tool operation of a WorkItem: the Mission, the
WorkItem, the caller's Ownership Epoch, a logical operation ID chosen by the capability, the
registered tool's name and its JSON arguments. The agent worker's ``run_tool`` activity
(``activities/tools.py``) derives the idempotency key from the first four with
:func:`mwp.core.idempotency.tool_key` (MWP-WRK-031), never from the Temporal activity ID,
which differs across retries and repeats after continue-as-new.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from mwp.core.idempotency import tool_key

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


def agent_task_queue(agent_id: str) -> str:
    """The task queue of ``agent_id``'s worker: ``mwp-agent/<agent id>``.

    Characters outside a conservative set are replaced by ``_``; because that (or truncating
    a very long ID) could make two IDs share a name, such names end with ``~`` and 16 hex
    digits of the ID's SHA-256, so distinct agents always get distinct queues.
    """
    if not isinstance(agent_id, str) or not agent_id:
        raise ValueError("agent_id must be a non-empty string")
    safe = _QUEUE_SAFE.sub("_", agent_id)
    name = AGENT_TASK_QUEUE_PREFIX + safe
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
