"""What the workers host: the one list to extend when adding a workflow or activity.

Workflow modules are imported here, never in the client SDK, so a client process does not
load workflow code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mwp.activities.parent_charge import charge_parent
from mwp.workflows.agent import AgentWorkflow
from mwp.workflows.coordinator_decision import CoordinatorDecisionWorkflow
from mwp.workflows.mission import MissionWorkflow
from mwp.workflows.organization import OrganizationRegistryWorkflow
from mwp.workflows.work_item import WorkItemWorkflow

# Workflow classes on the authority task queue (``mwp.contracts.names.AUTHORITY_TASK_QUEUE``).
WORKFLOWS: Sequence[type] = (OrganizationRegistryWorkflow, MissionWorkflow, WorkItemWorkflow)

# Activity functions on the authority task queue.
ACTIVITIES: Sequence[Callable[..., Any]] = (charge_parent,)

# The workflow an agent worker hosts on the agent's own task queue (with its activities,
# ``mwp.workers.agent``).
AGENT_WORKFLOWS: Sequence[type] = (AgentWorkflow,)

# The workflow a Coordinator's process hosts on its own task queue (``mwp.workers.coordinator``).
COORDINATOR_WORKFLOWS: Sequence[type] = (CoordinatorDecisionWorkflow,)

# Every workflow type the product runs: what recorded histories replay against.
ALL_WORKFLOWS: Sequence[type] = (*WORKFLOWS, *AGENT_WORKFLOWS, *COORDINATOR_WORKFLOWS)
