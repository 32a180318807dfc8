"""The Coordinator SDK: declare a Coordinator, write its planning and review as plain async
Python functions, and run it through the Group gateway (`mwp coordinator run`).

See docs/coordinators.md. ``declaration`` holds the declaration and what the functions see and
return; ``codec`` turns those into JSON and back; ``reconcile`` (pure) decides the next steps
from a Group's state; ``journal`` keeps the plans; ``decisions`` calls the functions, each call
one decision (a Temporal activity under ``mwp coordinator run``); ``runtime`` follows the
signed log through the gateway and takes the steps.
"""

from mwp.coordinator.declaration import (
    ChangesContext,
    ChildMission,
    Coordinator,
    KnowledgeSource,
    MessageContext,
    Plan,
    PlannedItem,
    PlanningContext,
    ProposalContext,
    ReuseContext,
    Review,
    ReviewContext,
)

__all__ = [
    "ChangesContext",
    "ChildMission",
    "Coordinator",
    "KnowledgeSource",
    "MessageContext",
    "Plan",
    "PlannedItem",
    "PlanningContext",
    "ProposalContext",
    "ReuseContext",
    "Review",
    "ReviewContext",
]
