"""`mwp demo` as a user runs it: the proof of concept starts its own `mwp dev`, runs every agent
as its own process, injects its failures and prints one JSON report. Every named check must
pass, each with the records that prove it, and the §22 requirements must all be among them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The §22 requirements and injected failures the report must prove (docs/proof-of-concept.md).
REQUIRED = {
    "agents.own_processes",
    "agents.through_gateway",
    "coordinator.plans_a_graph",
    *(f"stage.{s}" for s in ("requirements", "implementation", "testing", "code-review")),
    "stage.integration",
    "missions.concurrent",
    "scheduling.shared_worker",
    "scheduling.several_slots",
    "scheduling.queues_rebuilt",
    "scheduling.checkpoint_preemption",
    "scheduling.high_priority_arrival",
    "coordinator.reviews_evidence",
    "context.late_joiner",
    "isolation.artifacts",
    "isolation.context",
    "isolation.credentials",
    "failure.duplicate_delivery",
    "failure.duplicate_event_delivery",
    "failure.group_disconnection",
    "failure.worker_restart",
    "failure.lease_expiry",
    "failure.reassignment",
    "context.resumed_from_checkpoint",
    "coordinator.epoch_replacement",
    "coordinator.works_under_new_epoch",
    "human.change_request",
    "coordinator.replans_on_changes",
    "human.approves_revision",
    "human.approval_signed",
    "failure.action_id_collision",
    "failure.stale_session_epoch",
    "failure.stale_membership_epoch",
    "failure.stale_ownership_epoch",
    "failure.stale_coordinator_epoch",
    "child.created",
    "child.own_group",
    "child.coordinated",
    "child.approved_by_parent_coordinator",
    "child.verifies_parent_item",
    "knowledge.requires_approval",
    "knowledge.published_and_imported",
    "knowledge.readable_where_imported",
    "knowledge.not_by_default",
    "archival.signed_snapshot",
    "archival.refuses_commands",
    "log.full.verifies",
    "log.small.verifies",
    "log.child.verifies",
    "registry.performance_records",
}


def test_mwp_demo_proves_every_check_from_real_processes(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "mwp", "demo", "--json", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(ran.stdout)
    failed = [c for c in report["checks"] if not c["passed"]]
    assert ran.returncode == 0 and report["ok"], (failed, ran.stderr[-3000:])
    names = [c["name"] for c in report["checks"]]
    assert len(names) == len(set(names)) == report["passed"] >= 60
    assert sorted(REQUIRED - set(names)) == []
    # Each check carries what proves it, and the addresses a person would open are printed.
    assert all(c["proof"] for c in report["checks"]), [c["name"] for c in report["checks"]]
    assert report["temporalUi"].startswith("http://") and report["console"].startswith("http://")
    assert "Temporal UI" in ran.stderr and report["wallSeconds"] > 0
    logs = Path(report["logs"])
    assert {p.name for p in logs.glob("*.log")} >= {"dev.log", "lead.log", "tester.log"}
