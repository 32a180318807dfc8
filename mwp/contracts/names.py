"""Names the runtime shares with Temporal: task queues and the product's search attributes.

Shared by workflows, workers, the client SDK and the embedded stack, so they agree on them
without importing each other.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

# The Group Authorities and the Organization services run on this task queue.
AUTHORITY_TASK_QUEUE = "mwp-authority"

# Keyword search attributes the product keeps current, so Missions and WorkItems can be found
# and filtered in the Temporal UI. The embedded stack registers them at server start. The
# pure core names the values it computes for them the same way (mwp.core.group.views).
MISSION_ID = SearchAttributeKey.for_keyword("MissionId")
GROUP_ID = SearchAttributeKey.for_keyword("GroupId")
MISSION_STATE = SearchAttributeKey.for_keyword("MissionState")
WORK_ITEM_ID = SearchAttributeKey.for_keyword("WorkItemId")
WORK_ITEM_STATE = SearchAttributeKey.for_keyword("WorkItemState")
OWNER = SearchAttributeKey.for_keyword("Owner")
CAPABILITY = SearchAttributeKey.for_keyword("Capability")
# The Organization whose Group Authority a MissionWorkflow is, set by the client that starts it:
# a gateway lists only its own Organization's Missions when several share a namespace.
ORGANIZATION_ID = SearchAttributeKey.for_keyword("OrganizationId")
# A root Mission's MissionOwner (its principal ID), set by the client that starts it: the
# console asks visibility for one human's Missions instead of querying everyone's.
MISSION_OWNER = SearchAttributeKey.for_keyword("MissionOwner")

SEARCH_ATTRIBUTES: tuple[str, ...] = tuple(
    key.name
    for key in (
        MISSION_ID,
        GROUP_ID,
        MISSION_STATE,
        WORK_ITEM_ID,
        WORK_ITEM_STATE,
        OWNER,
        CAPABILITY,
        ORGANIZATION_ID,
        MISSION_OWNER,
    )
)
