"""The agent worker's line per run: what each outcome says, with the run's Mission and item."""

from __future__ import annotations

import pytest

from mwp.contracts.agent import ExecutionOrder, ExecutionOutcome
from mwp.workers.run_lines import agent_name, crash_line, outcome_line

ORDER = ExecutionOrder(
    agent_id="urn:mwp:agent:writer",
    session_epoch=1,
    group_id="urn:uuid:group",
    mission_id="urn:uuid:cd34ef56-0000-4000-8000-000000000000",
    work_item_id="urn:uuid:ab12ab12-0000-4000-8000-000000000000",
    ownership_epoch=1,
)
HEAD = "writer: work item ab12ab12 of mission cd34ef56"
FENCED = {"code": "WORK_STALE_OWNERSHIP", "message": "epoch 1 is not current"}


@pytest.mark.parametrize(
    ("status", "detail", "said"),
    [
        ("submitted", {}, "submitted (3.1 s)"),
        ("submitted", {"toolCalls": 2}, "submitted (2 tool calls, 3.1 s)"),
        (
            "failed",
            {"failure": "CAPABILITY_ERROR", "attempts": 2},
            "failed: CAPABILITY_ERROR after 2 attempt(s) (3.1 s)",
        ),
        ("preempted", {}, "preempted at a checkpoint (3.1 s)"),
        (
            "fenced",
            {"refusal": FENCED, "lateResult": True},
            "fenced: WORK_STALE_OWNERSHIP epoch 1 is not current; late result kept for audit"
            " (3.1 s)",
        ),
        ("fenced", {}, "fenced: lease lost (3.1 s)"),
        ("blocked", {"resolution": "approval"}, "blocked: approval (3.1 s)"),
        (
            "not_started",
            {"reason": "no declared capability"},
            "not started: no declared capability",
        ),
    ],
)
def test_each_outcome_is_one_line_naming_the_item_and_the_mission(
    status: str, detail: dict[str, object], said: str
) -> None:
    line = outcome_line("writer", ORDER, ExecutionOutcome(status, "urn:uuid:lease", detail), 3.14)
    assert line.startswith(f"{HEAD} {said}") and "\n" not in line, line


def test_a_crashed_attempt_says_which_and_why() -> None:
    line = crash_line("writer", ORDER, RuntimeError("disk full"), 3)
    assert line == f"{HEAD} crashed (attempt 3): RuntimeError: disk full"


def test_the_agent_is_named_by_the_last_part_of_its_id() -> None:
    assert agent_name("urn:mwp:agent:writer") == "writer"
