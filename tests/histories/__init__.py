"""Recorded workflow histories, one folder per release, replayed against the current code.

``python -m tests.histories.record RELEASE`` records a release's histories (see its docstring);
``tests/integration/test_recorded_histories.py`` replays every one of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pytest import MonkeyPatch
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from mwp.workers.plugin import MwpPlugin
from mwp.workers.registry import ALL_WORKFLOWS

HISTORIES = Path(__file__).parent


@dataclass(frozen=True)
class RecordedHistory:
    """One run of one workflow, as a release recorded it."""

    release: str
    name: str  # what the scenario shows, e.g. ``mission-continued.run-2``
    workflow_type: str
    history: WorkflowHistory


def recorded_histories(root: Path = HISTORIES) -> list[RecordedHistory]:
    """Every history under ``root``/RELEASE/, in release and name order."""
    found: list[RecordedHistory] = []
    for path in sorted(root.glob("*/*.json")):
        document = json.loads(path.read_text("utf-8"))
        history = WorkflowHistory.from_json(document["workflowId"], document["history"])
        found.append(
            RecordedHistory(path.parent.name, path.stem, document["workflowType"], history)
        )
    return found


def production_replayer() -> Replayer:
    """Every workflow type, configured as the product's workers are (:class:`MwpPlugin`)."""
    return Replayer(workflows=ALL_WORKFLOWS, plugins=[MwpPlugin()])


async def needs_patch(history: WorkflowHistory, patch_id: str, monkeypatch: MonkeyPatch) -> None:
    """``history`` replays, and with ``patch_id``'s check taken away (its old branch always;
    the marker itself still matched) it no longer does: the patch guards what the run did."""
    replayer = production_replayer()
    await replayer.replay_workflow(history)
    real = workflow.patched
    monkeypatch.setattr(workflow, "patched", lambda i: real(i) and i != patch_id)
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    monkeypatch.setattr(workflow, "patched", real)
    assert isinstance(replayed.replay_failure, workflow.NondeterminismError), history.workflow_id
