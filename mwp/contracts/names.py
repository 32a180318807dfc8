"""Names the runtime shares with Temporal: task queues and the product's search attributes.

Pure constants (no Temporal import), so workflows, workers, the client SDK and the embedded
stack agree on them without importing each other.
"""

from __future__ import annotations

# The Group Authorities and the Organization services run on this task queue.
AUTHORITY_TASK_QUEUE = "mwp-authority"

# Keyword search attributes the product keeps current, so Missions and WorkItems can be found
# and filtered in the Temporal UI. The embedded stack registers them at server start.
SEARCH_ATTRIBUTES: tuple[str, ...] = (
    "MissionId",
    "GroupId",
    "MissionState",
    "WorkItemId",
    "WorkItemState",
    "Owner",
    "Capability",
)
