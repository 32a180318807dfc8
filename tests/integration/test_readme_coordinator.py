"""The README's Coordinator block, run as written in a fresh folder: the dev stack, the
README's writer and its Coordinator (`examples/planner.py`) each a real process; the owner's
only commands are creating the Mission and approving it once the Coordinator submitted it."""

from __future__ import annotations

import re

from tests.integration.test_readme_quick_start import Shell, quick_start, shell  # noqa: F401


def test_the_readme_coordinator_takes_a_mission_to_approval(shell: Shell) -> None:  # noqa: F811
    lines = quick_start("## A Coordinator")
    assert lines[-1].startswith("mwp mission approve")
    outputs = [shell.run(line) for line in lines]

    assert "is awaiting_approval" in outputs[-2]
    assert "mission.approved" in outputs[-1]
    shown = shell.run("mwp mission show <mission>")
    assert "(approved," in shown
    coordinator_log = shell.background[2][1].read_text()
    assert "planned 2 WorkItems" in coordinator_log
    assert len(re.findall(r"accepted '(Outline|Draft): Ship the report'", coordinator_log)) == 2
    assert "submitted for Approval" in coordinator_log
    # Its functions ran as decision workflows on its task queue in the agents' namespace.
    assert "task queue mwp-coordinator/urn:mwp:agent:planner" in coordinator_log
    assert "namespace mwp-agents" in coordinator_log
    assert "CoordinatorDecisionWorkflow" in coordinator_log  # the Temporal UI link
    assert "Traceback" not in coordinator_log
