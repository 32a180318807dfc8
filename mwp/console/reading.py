"""What the Approval console shows a MissionOwner: their Missions and one Mission in full.

Read on the authority side, with the client SDK (Mission and WorkItem views, queried) and the
Artifact store (bytes, their content hash checked on every read). A human sees only the
Missions they own: another Mission is answered as one that does not exist.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from temporalio.client import WorkflowExecutionStatus

from mwp.client import MwpClient
from mwp.client.missions import MissionHandle
from mwp.contracts.mission import MISSION_WORKFLOW_TYPE, QUERY_MISSION, mission_workflow_id
from mwp.contracts.names import MISSION_OWNER
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import Principal

Json = dict[str, Any]

LISTED: Final = 200  # the most recent Missions looked at for the list
QUERIES: Final = 16  # Mission views queried at once


def not_found() -> MwpError:
    return MwpError(
        ErrorCode.GROUP_NOT_FOUND, "No such Mission.", diagnostic=Diagnostic("console", "mission")
    )


def owns(view: Mapping[str, Any], human: Principal) -> bool:
    owner = view.get("missionOwner") or {}
    return bool(owner.get("type") == human.type and owner.get("id") == human.id)


def _listed(view: Mapping[str, Any]) -> Json:
    submission = view.get("submission") or {}
    return {
        "missionId": view["missionId"],
        "objective": view.get("objective"),
        "state": view.get("state"),
        "revision": view.get("revision"),
        "deadline": view.get("deadline"),
        "workItems": len(view.get("workItems") or []),
        "awaitingApproval": view.get("state") == "awaiting_approval",
        "submittedRevision": submission.get("missionRevision"),
    }


# A Mission workflow closed this way never runs again (its ID is never reused), so its view is
# final; a run that continued as new is not: its Mission goes on in the next run.
_FINAL: Final = frozenset(
    {
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


class ClosedViews:
    """The final views of closed Missions, kept so the list queries each of them once: a
    closed workflow answers a query only by replaying its whole history."""

    def __init__(self, most: int = LISTED) -> None:
        self.most = most
        self._views: dict[str, Json | None] = {}
        self.queried = 0  # closed Missions queried (a figure for tests and the operator)

    def get(self, workflow_id: str) -> tuple[bool, Json | None]:
        if workflow_id in self._views:
            return True, self._views[workflow_id]
        return False, None

    def keep(self, workflow_id: str, view: Json | None) -> None:
        self.queried += 1
        self._views[workflow_id] = view
        while len(self._views) > self.most:
            del self._views[next(iter(self._views))]  # the oldest kept


async def owned_missions(
    client: MwpClient, human: Principal, closed: ClosedViews | None = None
) -> list[Json]:
    """The human's Missions, most recent first (their LISTED most recent); a closed Mission's
    view is taken from ``closed`` once it was read."""
    closed = closed if closed is not None else ClosedViews()
    final: dict[str, bool] = {}
    # Visibility names the human's Missions; a root Mission started before the attribute has
    # none and is read to see whose it is. A child Mission is never a human's (the parent's
    # Coordinator creates and owns it), so none is read.
    owner = human.id.replace("\\", "\\\\").replace("'", "\\'")
    query = (
        f"WorkflowType = '{MISSION_WORKFLOW_TYPE}' AND ({MISSION_OWNER.name} = '{owner}' "
        f"OR ({MISSION_OWNER.name} IS NULL AND ParentWorkflowId IS NULL))"
    )
    async for execution in client.temporal.list_workflows(query, limit=LISTED):
        # The first row of an ID is its latest run (most recent first).
        final.setdefault(execution.id, execution.status in _FINAL)
    gate = asyncio.Semaphore(QUERIES)

    async def view_of(workflow_id: str) -> Json | None:
        if final[workflow_id]:
            known, view = closed.get(workflow_id)
            if known:
                return view
        async with gate:
            try:
                value: Json | None = await client.query(workflow_id, QUERY_MISSION) or None
            except Exception:  # gone, or not answering: not listed
                value = None
        if final[workflow_id]:
            closed.keep(workflow_id, value)
        return value

    views = await asyncio.gather(*(view_of(i) for i in final))
    return [_listed(v) for v in views if v is not None and owns(v, human)]


async def owned(client: MwpClient, mission_id: str, human: Principal) -> tuple[MissionHandle, Json]:
    """The Mission's handle and view, if ``human`` owns it; else ``GROUP_NOT_FOUND``."""
    try:
        view: Json = await client.query(mission_workflow_id(mission_id), QUERY_MISSION)
    except Exception:
        raise not_found() from None
    if not view or not owns(view, human):
        raise not_found()
    return MissionHandle(client, mission_id, view["groupId"]), view


def _criteria(item: Mapping[str, Any]) -> list[Json]:
    """Each acceptance criterion with the submitted Evidence mapped to it."""
    evidence = item.get("submissionEvidence") or []
    shown = []
    for criterion in (item.get("contract") or {}).get("acceptanceCriteria", []):
        cid = criterion["criterionId"]
        shown.append(
            {
                "criterionId": cid,
                "description": criterion.get("description"),
                "evidenceRequired": criterion.get("evidenceRequired", []),
                # As submitted: a reference or a whole Evidence document (not its signature).
                "evidence": [
                    {k: v for k, v in e.items() if k != "signature"}
                    for e in evidence
                    if cid in (e.get("criterionIds") or [])
                ],
            }
        )
    return shown


async def mission_detail(handle: MissionHandle, view: Mapping[str, Any]) -> Json:
    """What the Mission page shows: the Mission, its submission, every WorkItem with the
    Evidence per criterion, and its Artifacts."""
    listed = view.get("workItems") or []
    gate = asyncio.Semaphore(QUERIES)

    async def item_of(work_item_id: str) -> Json:
        async with gate:
            item: Json = await handle.work_item(work_item_id)
            return item

    items = await asyncio.gather(*(item_of(w["workItemId"]) for w in listed))
    return {
        "mission": {
            k: view.get(k)
            for k in (
                "missionId",
                "groupId",
                "objective",
                "definitionOfDone",
                "state",
                "revision",
                "deadline",
                "missionOwner",
                "coordinator",
                "budget",
                "budgetUsed",
                "closingReason",
            )
        },
        "submission": view.get("submission"),
        "approval": view.get("approval"),
        "workItems": [
            {
                "workItemId": item["workItemId"],
                "goal": (item.get("contract") or {}).get("goal"),
                "state": item.get("state"),
                "owner": (item.get("owner") or {}).get("agentId"),
                "artifactHashes": (item.get("submission") or {}).get("artifactHashes", []),
                "criteria": _criteria(item),
            }
            for item in items
        ],
        "artifacts": [
            {
                "contentHash": a["contentHash"],
                "mediaType": a.get("mediaType"),
                "sizeBytes": a.get("sizeBytes"),
                "workItemId": a.get("workItemId"),
                "producer": (a.get("producer") or {}).get("agentId"),
            }
            for a in view.get("artifacts") or []
        ],
    }


def artifact_of(view: Mapping[str, Any], content_hash: str) -> Json:
    """The Mission's index entry of that Artifact; ``GROUP_NOT_FOUND`` if it has none."""
    for entry in view.get("artifacts") or []:
        if entry.get("contentHash") == content_hash:
            return dict(entry)
    raise MwpError(
        ErrorCode.GROUP_NOT_FOUND,
        "No such Artifact in this Mission.",
        diagnostic=Diagnostic("console", "artifact"),
    )
