"""Organization policy the Authority applies where the protocol leaves a number to policy.

Durations are in seconds. Requests above a maximum are refused rather than silently clipped, so
an actor always knows the lease it actually holds.
"""

from __future__ import annotations

from typing import Final

from mwp.core.kinds import CommandKind

COORDINATOR_LEASE_SECONDS: Final = 3600
MAX_COORDINATOR_LEASE_SECONDS: Final = 7 * 24 * 3600

# Ownership grant: how long an accepted WorkItem may wait in its owner's queue before starting.
START_WITHIN_SECONDS: Final = 3600
MAX_START_WITHIN_SECONDS: Final = 7 * 24 * 3600

EXECUTION_LEASE_SECONDS: Final = 300
MAX_EXECUTION_LEASE_SECONDS: Final = 3600

BLOCKED_LEASE_SECONDS: Final = 3600
MAX_BLOCKED_LEASE_SECONDS: Final = 7 * 24 * 3600

# A bounded candidate set for urgent placement (spec 10.3); one candidate is a sequential offer.
MAX_OFFER_CANDIDATES: Final = 8

# Receipts kept for duplicate detection across continue-as-new (see receipts.py for the bound).
RECEIPT_WINDOW: Final = 10_000

# Recent Messages that may still be corrected, retracted or redacted (see conversation.py).
MESSAGE_WINDOW: Final = 1_000

# Organization cooperation policy: the deepest descendant a Delegation Grant may allow below
# its target WorkItem (spec 9.1, 20). A grant asking for more is refused when issued.
MAX_DELEGATION_DEPTH: Final = 8

# Organization policy: the default maximum depth of the parent-child Mission graph (spec 14).
# Deeper children are refused (explicit approval beyond it is not implemented).
MAX_CHILD_MISSION_DEPTH: Final = 4

DEFAULT_SCOPES: Final[dict[str, tuple[str, ...]]] = {
    "mission_owner": ("mission.own",),
    "coordinator": ("mission.coordinate",),
    "worker": ("work.execute",),
    "reviewer": ("work.review",),
    "observer": ("mission.observe",),
    "work_delegate": ("work.delegate",),
}

# Command kinds that add WorkItems (or proposals that become them) to a Group: refused once
# the shell says the Group is at capacity (``AuthorityContext.at_capacity``).
GROWING_COMMAND_KINDS: Final[frozenset[CommandKind]] = frozenset(
    {"work.propose", "work.authorize", "mission.create_child"}
)
