"""What the authority worker hosts: the one list to extend when adding a workflow or activity.

Workflow modules are imported here, never in the client SDK, so a client process does not
load workflow code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mwp.workflows.mission import MissionWorkflow
from mwp.workflows.organization import OrganizationRegistryWorkflow
from mwp.workflows.work_item import WorkItemWorkflow

# Workflow classes on the authority task queue (``mwp.contracts.names.AUTHORITY_TASK_QUEUE``).
WORKFLOWS: Sequence[type] = (OrganizationRegistryWorkflow, MissionWorkflow, WorkItemWorkflow)

# Activity functions on the authority task queue.
ACTIVITIES: Sequence[Callable[..., Any]] = ()

# Imported once, outside the workflow sandbox, and shared by every workflow run. ``mwp`` is
# pure and deterministic; passing it through spares re-importing the protocol core and its
# Pydantic models for each workflow run. ``cryptography`` and ``nacl`` are native bindings the
# sandbox cannot re-import at all.
SANDBOX_PASSTHROUGH_MODULES: tuple[str, ...] = ("mwp", "cryptography", "nacl")
