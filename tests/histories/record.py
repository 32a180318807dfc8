"""Record a release's workflow histories: ``python -m tests.histories.record RELEASE``.

Runs the recording scenarios (``tests/integration/history_scenarios.py``) and the integration
tests that reach the rarer paths (a child Mission, an AgentWorkflow rolling over with runs in
flight, a registry continuing as new) against one dev server, exports every workflow history
that server holds, and keeps one example of each shape :func:`select` names in
``tests/histories/RELEASE/``. Record with the code of the release being recorded, before
changing any workflow; never edit a recorded history (the replay test exists to read old ones
exactly as they were).

A workflow type added between releases is replay-guarded from the day it is added:
``python -m tests.histories.record RELEASE --add SHAPE`` runs only that shape's source and
writes its histories into the current release's folder, next to the ones recorded there,
never over one (``LATER_SHAPES``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from mwp.contracts.coordinator import DECISION_WORKFLOW_TYPE as DECISION_TYPE
from mwp.contracts.mission import CHARGE_PARENT
from mwp.contracts.mission import UPDATE_CHILD_USAGE as UPDATE
from tests.histories import HISTORIES

# Recording needs these to run (their workflows), not to pass.
SOURCES = (
    "tests/integration/history_scenarios.py",
    "tests/integration/test_child_and_follow_up_missions.py",
    "tests/integration/test_agent_runtime.py::test_the_scheduler_rolls_over_between_runs_and_loses_no_work",
    "tests/integration/test_organization_registry.py::test_continue_as_new_keeps_the_whole_state",
    # Missions that complete after their retention window, WorkItems that end Failed, Cancelled.
    "tests/integration/test_mission_completion.py",
    # A child Mission's usage charged to its parent (from 0.6.0: the charge_parent activity
    # in the child, the child_usage Update in the parent).
    "tests/integration/test_child_usage.py",
    # A Coordinator's decisions (from 0.7.0, added after its release: LATER_SHAPES).
    "tests/integration/test_coordinator_decisions.py",
)
EXPORT_FILE = "export.jsonl"

Run = dict[str, Any]  # workflowId, runId, workflowType, history (the JSON dict)


async def export_all(address: str, namespaces: Iterable[str], into: Path) -> int:
    """Append every run's history in ``namespaces`` (the authority's, and the agents' where
    the AgentWorkflows run; one that was never created is skipped) to ``into``/export.jsonl;
    how many."""
    count = 0
    for namespace in namespaces:
        client = await Client.connect(address, namespace=namespace)
        try:
            count += await _export(client, into)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
    return count


async def _export(client: Client, into: Path) -> int:
    count = 0
    with (into / EXPORT_FILE).open("a", encoding="utf-8") as out:
        async for execution in client.list_workflows():
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            history = await handle.fetch_history()
            run = {
                "workflowId": execution.id,
                "runId": execution.run_id,
                "workflowType": execution.workflow_type,
                "history": history.to_json_dict(),
            }
            out.write(json.dumps(run) + "\n")
            count += 1
    return count


def _event_types(run: Run) -> list[str]:
    return [str(e["eventType"]) for e in run["history"]["events"]]


def _has(run: Run, *event_types: str) -> bool:
    kinds = set(_event_types(run))
    return all(any(k.endswith(t) for k in kinds) for t in event_types)


def _mentions(run: Run, text: str) -> bool:
    """Whether a name (an activity type, an Update name) appears in the run's history."""
    return f'"{text}"' in json.dumps(run["history"])


def _started(run: Run) -> dict[str, Any]:
    attributes: dict[str, Any] = run["history"]["events"][0][
        "workflowExecutionStartedEventAttributes"
    ]
    return attributes


def _runs_in_order(runs: list[Run]) -> list[Run]:
    """A workflow's runs, first to last (each continued run names the one before it)."""
    by_previous = {_started(r).get("continuedExecutionRunId", ""): r for r in runs}
    ordered, previous = [], ""
    while previous in by_previous:
        ordered.append(by_previous[previous])
        previous = ordered[-1]["runId"]
    return ordered


def _chains(runs: Iterable[Run]) -> dict[str, list[Run]]:
    """Each workflow's runs, first to last, by workflow ID."""
    workflows: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        workflows[run["workflowId"]].append(run)
    return {wid: _runs_in_order(rs) for wid, rs in workflows.items()}


def _kept(prefix: str, chain: list[Run]) -> dict[str, Run]:
    """A chain's runs by name; a run the server had not yet given a first workflow task
    decided nothing, and the Replayer would wait forever for its first local activity."""
    return {
        f"{prefix}.run-{number}": run
        for number, run in enumerate(chain, start=1)
        if _has(run, "WORKFLOW_TASK_COMPLETED")
    }


def decision_shapes(chains: dict[str, list[Run]]) -> dict[str, Run]:
    """A Coordinator's decision that completed, and one that failed every attempt."""
    decisions = [c for c in chains.values() if c and c[0]["workflowType"] == DECISION_TYPE]
    chosen: dict[str, Run] = {}
    for status in ("COMPLETED", "FAILED"):
        if ended := _ended(decisions, status):
            chosen.update(_kept(f"coordinator-decision-{status.lower()}", ended))
    return chosen


# Shapes of workflow types added after a release (``--add``): their source, their selection.
LATER_SHAPES: dict[str, tuple[str, Callable[[dict[str, list[Run]]], dict[str, Run]]]] = {
    "coordinator-decision": ("tests/integration/test_coordinator_decisions.py", decision_shapes),
}


def select(runs: Iterable[Run]) -> dict[str, Run]:
    """One example of each shape the replay test must keep covering, by name."""
    chains = _chains(runs)

    def of_type(name: str) -> list[list[Run]]:
        return [c for c in chains.values() if c and c[0]["workflowType"] == name]

    def longest(name: str, keep: Callable[[list[Run]], bool] = lambda c: True) -> list[Run]:
        candidates = [c for c in of_type(name) if keep(c)]
        if not candidates:
            raise SystemExit(f"no {name} history of the wanted shape was recorded")
        return max(candidates, key=lambda c: (len(c), sum(len(_event_types(r)) for r in c)))

    chosen: dict[str, Run] = {}

    def keep(prefix: str, chain: list[Run]) -> None:
        chosen.update(_kept(prefix, chain))

    keep("mission-continued", longest("MissionWorkflow", lambda c: len(c) >= 3))
    keep(
        "mission-child",
        longest("MissionWorkflow", lambda c: "parentWorkflowExecution" in _started(c[0])),
    )
    keep(
        "work-item-timer-fired",
        longest(
            "WorkItemWorkflow",
            lambda c: any(
                _has(r, "TIMER_FIRED", "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED") for r in c
            ),
        ),
    )
    keep(
        "work-item-settled",
        longest("WorkItemWorkflow", lambda c: _has(c[-1], "WORKFLOW_EXECUTION_COMPLETED")),
    )
    for status in ("COMPLETED", "FAILED"):
        if ended := _ended(of_type("MissionWorkflow"), status):
            keep(f"mission-{status.lower()}", ended)
    for status in ("FAILED", "CANCELED"):
        if ended := _ended(of_type("WorkItemWorkflow"), status):
            keep(f"work-item-{status.lower()}", ended)
    # Shapes only releases from 0.6.0 on can record.
    for name, text in (("mission-charging-parent", CHARGE_PARENT), ("mission-charged", UPDATE)):
        if found := [c for c in of_type("MissionWorkflow") if any(_mentions(r, text) for r in c)]:
            keep(name, max(found, key=lambda c: sum(len(_event_types(r)) for r in c)))
    keep("registry-continued", longest("OrganizationRegistryWorkflow", lambda c: len(c) >= 2))
    keep("registry-of-missions", longest("OrganizationRegistryWorkflow", lambda c: len(c) == 1))
    keep("agent-rollover", longest("AgentWorkflow", lambda c: len(c) >= 2))
    chosen.update(decision_shapes(chains))
    return chosen


def _ended(chains: list[list[Run]], status: str) -> list[Run] | None:
    """The longest chain whose last run ended with ``WORKFLOW_EXECUTION_<status>`` (shapes
    only releases from 0.3.0 on can record: older code never ended these workflows)."""
    ended = [c for c in chains if _has(c[-1], f"WORKFLOW_EXECUTION_{status}")]
    return max(ended, key=lambda c: sum(len(_event_types(r)) for r in c)) if ended else None


def scrubbed(value: Any) -> Any:
    """``value`` with every failure's ``stackTrace`` emptied: it names the recording machine's
    paths, and replay never reads it."""
    if isinstance(value, dict):
        return {k: "" if k == "stackTrace" else scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v) for v in value]
    return value


def write(chosen: dict[str, Run], release: str, *, adding: bool = False) -> Path:
    """``chosen`` into the release's new folder (or, ``adding``, into its existing one, next
    to what is there and never over it)."""
    folder = HISTORIES / release
    if adding:
        if not folder.is_dir():
            raise SystemExit(f"{folder} does not exist: record the release first")
        if clash := sorted(n for n in chosen if (folder / f"{n}.json").exists()):
            raise SystemExit(f"{folder} already holds {', '.join(clash)}: recorded once")
        if not chosen:
            raise SystemExit("nothing of that shape was recorded")
    elif folder.exists():
        raise SystemExit(f"{folder} exists: a release's histories are recorded once")
    folder.mkdir(parents=True, exist_ok=adding)
    for name, run in sorted(chosen.items()):
        document = {
            "workflowType": run["workflowType"],
            "workflowId": run["workflowId"],
            "history": scrubbed(run["history"]),
        }
        (folder / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n", "utf-8")
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", help="the release these histories come from, e.g. 0.1.0")
    parser.add_argument(
        "--add",
        choices=sorted(LATER_SHAPES),
        help="record only this shape of a workflow type added after the release, into its folder",
    )
    args = parser.parse_args(argv)
    sources = [LATER_SHAPES[args.add][0]] if args.add else list(SOURCES)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MWP_RECORD_HISTORIES": tmp}
        subprocess.run([sys.executable, "-m", "pytest", "-q", *sources], env=env, check=False)
        lines = (Path(tmp) / EXPORT_FILE).read_text("utf-8").splitlines()
        runs = [json.loads(line) for line in lines]
        chosen = LATER_SHAPES[args.add][1](_chains(runs)) if args.add else select(runs)
        folder = write(chosen, args.release, adding=bool(args.add))
    print(f"recorded {len(chosen)} histories in {folder}")


if __name__ == "__main__":
    main()
