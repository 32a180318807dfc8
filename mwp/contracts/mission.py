"""The ``MissionWorkflow``'s contract: its ID, type, Update, Query and Signal names, its input
and the messages it exchanges with its WorkItem children and the mirror activity.

Shared by the workflows and the client SDK, so a client never imports workflow code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from mwp.core.trust.signed_document import FreshnessWindow

MISSION_WORKFLOW_TYPE = "MissionWorkflow"

# Every Command, as its exact wire text: the Update the Group Authority decides.
UPDATE_COMMAND = "command"
QUERY_MISSION = "mission"  # the Mission view
QUERY_EPOCHS = "epochs"  # the Membership and Coordinator epochs a principal's Command carries
QUERY_WORK_ITEM = "work_item"
QUERY_SEQUENCE = "sequence"
QUERY_EVENTS_THIS_RUN = "events_this_run"
QUERY_RUN_NUMBER = "run_number"
QUERY_REFUSED_MESSAGES = "refused_messages"  # what the workflow refused of the signals sent to it
QUERY_MIRRORED_THROUGH = "mirrored_through"
# A child Mission's usage for its parent Group to charge first (sealed, child_usage.py): the
# only Update one workflow sends another, through the ``charge_parent`` activity.
UPDATE_CHILD_USAGE = "child_usage"
CHARGE_PARENT = "charge_parent"  # the activity (mwp.activities.parent_charge)
# From its WorkItem children, and between parent and child Missions.
SIGNAL_TIMER_FIRED = "timer_fired"
SIGNAL_CHILD_SETTLED = "child_settled"
SIGNAL_PARENT_CLOSED = "parent_closed"
# The failure type a failed Mission's workflow ends with; its details hold the Mission view.
MISSION_FAILED = "MissionFailed"

# Below Temporal's 2,000 Updates per run (duplicates and handler failures count there too).
# A server that suggests continue-as-new earlier (its default: 4,096 events, about 900
# Commands) ends runs sooner; the embedded stack raises that suggestion (mwp/dev/stack.py).
DEFAULT_UPDATES_PER_RUN = 1_800


@dataclass
class MissionInput:
    organization_id: str
    authority: dict[str, str]  # the Group Authority service Principal (acceptedBy)
    snapshot: dict[str, Any] | None = None
    registry_notice: dict[str, Any] | None = None  # the newest RegistryNotice, as JSON
    updates_per_run: int = DEFAULT_UPDATES_PER_RUN
    run_number: int = 1
    # A child Mission's first run: the parent Group's ``mission.child.created`` Event.
    founding: dict[str, Any] | None = None
    # Accepted Events not yet confirmed in the Group Event log, carried across runs (packed
    # like the snapshot: ``{"events": [...]}``).
    outbox: dict[str, Any] | None = None
    # Where the mirror activity runs (None: the authority task queue).
    mirror_task_queue: str | None = None
    # Past this many bytes of packed continue-as-new snapshot the Group takes no new WorkItems.
    snapshot_capacity: int = 0  # 0: SNAPSHOT_CAPACITY
    # Sealed messages (mwp.contracts.messages), set by the runs that seal. ``sealing``:
    # ``{"legacyChildren": bool, "children": [child Mission IDs started sealing]}``; None on a
    # Group's first run, or after a run from before sealing (whose children may be unsealed).
    sealing: dict[str, Any] | None = None
    # This child Mission's parent run does not seal (it started before the upgrade).
    legacy_parent: bool = False
    # The messages this Group refused (RefusalRecord JSON), kept across runs for operators.
    refusals: dict[str, Any] | None = None
    # How long a closed Mission's workflow keeps answering retries before it completes
    # (0: CLOSED_RETENTION_SECONDS; tests shorten it). docs/operations.md, "Closed Missions".
    closed_retention_seconds: int = 0
    # The Organization's cooperation limits (``CooperationLimits.to_json``; None: the defaults),
    # which every run and child Mission of this Group decides under.
    cooperation_limits: dict[str, Any] | None = None


# A retry of a Mission's last Commands is answered with its receipt while the workflow runs.
# Past the freshness window (plus the clock skew allowed) after the Mission closed, no Command
# issued before the close could be presented fresh anyway, so a client still retrying one
# would have to sign a new Command, which a closed Mission refuses: the workflow may end.
CLOSED_RETENTION_SECONDS = FreshnessWindow().max_age_seconds + FreshnessWindow().max_skew_seconds
# The Temporal UI's summary is short; longer objectives and goals are cut to this many chars.
SUMMARY_CHARS = 200
# Rows of the WorkItem table in a Mission's current details (the most recently changed).
DETAILS_ROWS = 8


# A Group's state travels as one continue-as-new input, and Temporal refuses payloads over
# 2 MiB. Each settled WorkItem adds about 0.8 KB to the packed snapshot (measured by `make
# bench-group`), so past this size (about 1,900 WorkItems) the Group refuses new WorkItems with
# a typed error, well before the limit: its work continues in a follow-up Mission.
SNAPSHOT_CAPACITY = 1_500_000

# The mirror activity (activities/mirror.py): its name and input, shared with the workflow.
MIRROR_EVENTS = "mirror_events"
MIRROR_BATCH_LIMIT = 500  # Events per activity call
# And bytes per call: an accepted Command may be 512 KiB (command_size.py), so a few large
# Events could otherwise make an activity input over Temporal's 2 MiB payload limit.
MIRROR_BATCH_BYTES = 1_048_576
# Past this many unconfirmed Events the Group answers BACKPRESSURE until the log catches up.
MIRROR_OUTBOX_LIMIT = 5_000


@dataclass
class MirrorBatch:
    group_id: str
    authority_id: str  # the Group Authority Principal: whose key signs
    events: list[dict[str, Any]]  # accepted, unsigned, contiguous, in Group order


# The archival service: a closed Group's signed final snapshot, and the archive Command
# carrying it (compact), signed by its Group Authority, as its wire text.
ARCHIVE_GROUP = "archive_group"


@dataclass
class ArchiveRequest:
    group_id: str
    authority_id: str  # the Group Authority Principal: it signs the snapshot and the Command
    through_sequence: int  # the Group's last sequence, already in the Group Event log
    evidence: dict[str, Any]  # the Registry evidence the log's entries are verified against


@dataclass
class TimerReport:
    work_item_id: str
    kind: str
    token: str


# A Mission's workflow task may replay a whole run (after a worker restart or a cache
# eviction): up to 1,800 Commands, each verified and decided again. Temporal's default of 10 s
# was measured too short on a loaded 2-core host (benchmarks/RESULTS.md): every retry timed out.
MISSION_TASK_TIMEOUT = timedelta(seconds=60)


def mission_workflow_id(mission_id: str) -> str:
    return f"mwp-mission/{mission_id}"


@dataclass
class ParentCharge:
    """The ``charge_parent`` activity's input."""

    parent_workflow_id: str
    sealed: dict[str, Any]  # the child-usage message, sealed for the parent
