"""Every patch a workflow checks, with the day it was added: the one list of patch IDs.

A running Group replays its history on every worker restart, so any change to what a workflow
does (the commands it issues, their order, the timers it starts) must keep reproducing the
old commands for histories recorded before the change. The life of a patch:

1. **Patched.** Add a :class:`Patch` here and guard the new behaviour:
   ``if workflow.patched(patches.X.id): new() else: old()``. New runs record a marker and take
   the new branch; replaying an old history (no marker) takes the old branch. Record this
   release's histories (``python -m tests.histories.record RELEASE``).
2. **Deprecated.** Once no run that started before the patch is open (list them with the
   ``TemporalChangeVersion`` search attribute, or wait out the longest Mission), replace the
   check with ``workflow.deprecate_patch(patches.X.id)`` and delete the old branch; set
   ``deprecated`` below. Histories with or without the marker both replay.
3. **Removed.** Once no run that started before the deprecation is open, delete the call and
   this entry; drop recorded histories older than the deprecation from ``tests/histories``.

A change that only a new input field turns on (absent from every earlier history) and that
issues no new command is versioned by that field instead: WorkItemWorkflow opens its
transitions only when its start input carries ``trusted_key``.

``tests/workflows/test_patches.py`` checks that this list and the calls in workflow code
agree, and that each live patch is needed: replaying the recorded histories from before it
with its check removed must fail.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Patch:
    id: str  # never reused, never renamed
    added: str  # the day the patch was added (UTC, YYYY-MM-DD)
    workflow: str  # the workflow type that checks it
    why: str  # the behaviour change it guards
    deprecated: str | None = None  # the day its check became deprecate_patch
    # Why no recorded history from before the patch shows the change, when none can: the
    # change acts only on what no earlier run ever sent. Then the test named here shows,
    # on a history recorded with the patch, that replaying it without the check fails.
    shown_by: str | None = None


MISSION_SEALED_MESSAGES = Patch(
    "mission-sealed-messages",
    "2026-12-01",
    "MissionWorkflow",
    "messages to and from other workflows are sealed and opened (registry notices, child "
    "reports, parent closures, approval notices, WorkItem transitions and timers); Commands "
    "are decided under the door rules of issue 12 (AuthorityContext.rules)",
)
REGISTRY_SEALED_MESSAGES = Patch(
    "registry-sealed-messages",
    "2026-12-01",
    "OrganizationRegistryWorkflow",
    "notices are sealed; approval notices and (un)subscriptions are opened before use",
)
AGENT_SEALED_SIGNALS = Patch(
    "agent-sealed-signals",
    "2026-12-01",
    "AgentWorkflow",
    "deliveries, Session changes, preemption and policy signals are opened before use",
)

MISSION_COMPLETES = Patch(
    "mission-completes",
    "2026-12-01",
    "MissionWorkflow",
    "a closed Mission's workflow completes (Failed for a failed Mission) once its Events are "
    "mirrored, its children told and its handlers finished, after a retention window in which "
    "retries still get their receipts; a failed WorkItem's child is sent its final view and a "
    "cancelled one's child is asked to cancel; summaries name the objective and the goal",
)
WORK_ITEM_ENDS_AS_ITEM = Patch(
    "work-item-ends-as-item",
    "2026-12-01",
    "WorkItemWorkflow",
    "the workflow of a failed WorkItem ends Failed (its final view in the failure's details), "
    "that of a cancelled one ends Cancelled once its Mission asks; a verified one completes",
    shown_by="tests/integration/test_mission_completion.py::"
    "test_a_new_style_work_item_history_needs_its_patch",
)

MISSION_ARCHIVES = Patch(
    "mission-archives",
    "2026-12-01",
    "MissionWorkflow",
    "Commands are decided under the archive rules (AuthorityContext.rules): a closed Group "
    "takes the group_archive Command, whose signed final snapshot the workflow verifies, "
    "records group.snapshot.created and group.archived, then refuses every Command; the "
    "workflow ends its retention window once the Group is archived; the Events of a Command "
    "carry its signing hash as commandHash (the whole Command's hash before)",
    shown_by="tests/integration/test_group_archive.py::test_an_archiving_history_needs_its_patch",
)

MISSION_CONTEXT_PACKAGES = Patch(
    "mission-context-packages",
    "2026-12-01",
    "MissionWorkflow",
    "Commands are decided under the Context Package rules (AuthorityContext.rules): the Group "
    "takes context_package_publish, a work.offer admitting a new Worker and a replacement "
    "Coordinator must name a package the Group published, an offer may carry its package "
    "inline; the workflow verifies a carried package's signature against the Registry evidence",
    shown_by="tests/integration/test_context_packages.py::"
    "test_packages_are_published_named_by_offers_and_carried_inline_behind_a_patch",
)

MISSION_LEDGER = Patch(
    "mission-ledger",
    "2026-12-01",
    "MissionWorkflow",
    "Commands are decided under the ledger rules (AuthorityContext.rules, RULES_LEDGER): "
    "resource usage records charged to the WorkItem and its ancestry, review records citing "
    "Evidence, the signed Approval inside mission.approved",
    shown_by="tests/integration/test_resource_usage.py::"
    "test_usage_is_charged_logged_refused_over_budget_and_needs_the_ledger_patch",
)

MISSION_OVERSIGHT = Patch(
    "mission-oversight",
    "2026-12-02",
    "MissionWorkflow",
    "Commands are decided under the oversight rules (AuthorityContext.rules, RULES_OVERSIGHT); "
    "a closed Group whose retention window ends unarchived archives itself before the "
    "workflow completes",
    shown_by="tests/integration/test_group_archive.py::"
    "test_a_closed_group_archives_itself_when_its_retention_window_ends",
)

MISSION_CHILD_USAGE = Patch(
    "mission-child-usage",
    "2026-12-02",
    "MissionWorkflow",
    "Commands are decided under the child usage rules (AuthorityContext.rules, "
    "RULES_CHILD_USAGE), one at a time: a child Mission's usage is charged to its parent Group "
    "(the child_usage Update, through the charge_parent activity) before the child records it",
    shown_by="tests/integration/test_child_usage.py::"
    "test_a_child_missions_usage_is_charged_to_its_parent_or_refused_in_both",
)

AGENT_CITED_RESULTS = Patch(
    "agent-cited-results",
    "2026-12-03",
    "AgentWorkflow",
    "a dependency's work.result.accepted that an offer's Context Package cites (the dependency "
    "was verified before the Worker's visibility start) counts as verified: the Worker admits "
    "the offer and starts the item, where before it declined (dependency unknown) or kept it "
    "waiting",
    shown_by="tests/integration/test_coordinator_runtime.py::"
    "test_a_worker_new_to_the_group_starts_an_item_whose_dependency_was_verified_before_it",
)

# A local activity that resolves while its workflow task is being completed is recorded in that
# task but handed to the workflow in the next activation; on replay it resolves at its marker,
# ahead of an Update that arrived in that next activation, and the transition signal it seals
# then lands before the Update's acceptance: TMPRL1100 "Signal external WF machine does not
# handle this event: WorkflowExecutionUpdateAccepted" (temporalio 1.35, about one proof of
# concept run in five; tests/histories/unreplayable). An activity's result is an Event in
# history, replayed where it arrived.
MISSION_AUTHORITY_ACTIVITIES = Patch(
    "mission-authority-activities",
    "2026-12-03",
    "MissionWorkflow",
    "the authority's key work (the sealing key, sealing a message, signing failure Evidence) "
    "runs as activities, where it ran as local activities",
)

REGISTRY_AUTHORITY_ACTIVITIES = Patch(
    "registry-authority-activities",
    "2026-12-03",
    "OrganizationRegistryWorkflow",
    "the sealing key and the sealed registry notice are fetched by activities, where they "
    "were local activities (see MISSION_AUTHORITY_ACTIVITIES)",
)

MISSION_OFFLINE_RENEWALS = Patch(
    "mission-offline-renewals",
    "2026-12-05",
    "MissionWorkflow",
    "Commands are decided under the offline renewal rules (AuthorityContext.rules, "
    "RULES_OFFLINE_RENEWALS): a reconciled offline checkpoint whose binding states an earlier "
    "expiry of its lease (the receipt of a renewal never reached the Worker) is taken, where it "
    "was refused (INVALID_COMMAND)",
    shown_by="tests/integration/test_offline_reconciliation.py::"
    "test_a_checkpoint_bound_to_an_expiry_a_lost_renewal_receipt_left_needs_its_patch",
)

# Oldest first.
PATCHES: tuple[Patch, ...] = (
    MISSION_SEALED_MESSAGES,
    REGISTRY_SEALED_MESSAGES,
    AGENT_SEALED_SIGNALS,
    MISSION_COMPLETES,
    WORK_ITEM_ENDS_AS_ITEM,
    MISSION_ARCHIVES,
    MISSION_CONTEXT_PACKAGES,
    MISSION_LEDGER,
    MISSION_OVERSIGHT,
    MISSION_CHILD_USAGE,
    AGENT_CITED_RESULTS,
    MISSION_AUTHORITY_ACTIVITIES,
    REGISTRY_AUTHORITY_ACTIVITIES,
    MISSION_OFFLINE_RENEWALS,
)
