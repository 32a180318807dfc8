"""Ready-made Temporal UI links for a Mission: its workflow's page, and workflow lists by
search attribute (its WorkItems, everything of the Mission, its Group).

>>> links = mission_links("http://127.0.0.1:8233", "default", "urn:uuid:1")
>>> links.work_items
'http://127.0.0.1:8233/namespaces/default/workflows?query=WorkflowType%3D%22WorkItemWorkflow%22+AND+MissionId%3D%22urn%3Auuid%3A1%22'

Pure string building: no connection, no Temporal import, so the CLI can print them anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

from mwp.contracts.coordinator import DECISION_WORKFLOW_TYPE
from mwp.contracts.mission import MISSION_WORKFLOW_TYPE, mission_workflow_id
from mwp.contracts.names import GROUP_ID, MISSION_ID, MISSION_STATE, WORK_ITEM_STATE
from mwp.contracts.work_item import WORK_ITEM_WORKFLOW_TYPE


def equals(attribute: str, value: str) -> str:
    """``attribute="value"`` in Temporal's list filter syntax, the value quoted and escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{attribute}="{escaped}"'


def workflow_url(ui_base: str, namespace: str, workflow_id: str) -> str:
    """A workflow's page (its newest run)."""
    return f"{_namespace(ui_base, namespace)}/workflows/{quote(workflow_id, safe='')}"


def workflows_url(ui_base: str, namespace: str, query: str) -> str:
    """The workflow list filtered by ``query`` (a visibility query, e.g. :func:`equals`)."""
    return f"{_namespace(ui_base, namespace)}/workflows?{urlencode({'query': query})}"


@dataclass(frozen=True)
class MissionLinks:
    mission: str  # the MissionWorkflow's page
    work_items: str  # its WorkItemWorkflows, with their states and owners
    failed_work_items: str  # the ones that failed
    everything: str  # the Mission's workflow and its WorkItems' (all carry MissionId)
    group: str | None  # the Group's workflows (by GroupId), when the Group is known

    def lines(self) -> list[str]:
        """What a CLI prints, one labelled link a line."""
        rows = [
            f"Temporal UI: {self.mission}",
            f"  WorkItems: {self.work_items}",
            f"  failed WorkItems: {self.failed_work_items}",
        ]
        if self.group is not None:
            rows.append(f"  Group: {self.group}")
        return rows


def mission_links(
    ui_base: str, namespace: str, mission_id: str, group_id: str | None = None
) -> MissionLinks:
    """Every link of one Mission, given the UI's base URL (e.g. ``http://127.0.0.1:8233``)."""
    mission = equals(MISSION_ID.name, mission_id)
    work_items = f"{equals('WorkflowType', WORK_ITEM_WORKFLOW_TYPE)} AND {mission}"
    return MissionLinks(
        mission=workflow_url(ui_base, namespace, mission_workflow_id(mission_id)),
        work_items=workflows_url(ui_base, namespace, work_items),
        failed_work_items=workflows_url(
            ui_base, namespace, f"{work_items} AND {equals(WORK_ITEM_STATE.name, 'failed')}"
        ),
        everything=workflows_url(ui_base, namespace, mission),
        group=(
            workflows_url(ui_base, namespace, equals(GROUP_ID.name, group_id))
            if group_id is not None
            else None
        ),
    )


def decisions_url(ui_base: str, namespace: str, task_queue: str) -> str:
    """A Coordinator's decisions: the decision workflows of its task queue, one per call of
    one of its functions."""
    query = (
        f"{equals('WorkflowType', DECISION_WORKFLOW_TYPE)} AND {equals('TaskQueue', task_queue)}"
    )
    return workflows_url(ui_base, namespace, query)


def missions_url(ui_base: str, namespace: str, state: str | None = None) -> str:
    """Every Mission of the namespace (in ``state``, e.g. ``approved``, when given)."""
    query = equals("WorkflowType", MISSION_WORKFLOW_TYPE)
    if state is not None:
        query += f" AND {equals(MISSION_STATE.name, state)}"
    return workflows_url(ui_base, namespace, query)


def _namespace(ui_base: str, namespace: str) -> str:
    return f"{ui_base.rstrip('/')}/namespaces/{quote(namespace, safe='')}"
