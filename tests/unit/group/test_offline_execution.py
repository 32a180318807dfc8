"""Bounded offline execution (spec 11.5, MWP-WRK-020 to 022): a checkpoint a Worker buffered
while the Group was unreachable carries the critical bounded-offline-execution binding and is
re-signed under the Worker's new Session on reconnect. The Group takes it only as the truth
about the lease the run held, inside that lease and the grace, and charges the offline usage in
the same decision; anything else is refused and changes nothing. The lease expiry it states may
be an earlier one of the same lease, when the receipt of a renewal never reached the run."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import replay
from mwp.core.group.api import RULES_CHILD_USAGE, RULES_LEDGER, RULES_OFFLINE_RENEWALS, Outcome
from mwp.core.group.clock import plus_seconds
from mwp.core.group.offline_execution import MAX_GRACE_SECONDS, OFFLINE_EXTENSION
from mwp.core.group.resource_usage import RECORDED_KIND
from tests.unit.group.harness import (
    GROUP,
    W1,
    W2,
    item_id,
    mission_harness,
    progress,
)

CHECKPOINT = "work.checkpoint"
RENEW = "ext.missionweaveprotocol.core.execution_lease_renew"


class Offline:
    """WorkItem ``a`` active under W1's lease, renewed ``renewals`` times a second apart; the
    connection is lost ``lost_after`` seconds in. With ``last_receipt_lost`` the Group decided
    the last renewal but its receipt never reached the run, which still knows the expiry before
    it (``expires_at``; the Group's is ``held_expiry``)."""

    def __init__(
        self, lost_after: int = 10, *, renewals: int = 0, last_receipt_lost: bool = False
    ) -> None:
        self.h = mission_harness()
        self.h.drive("a", "active")
        lease = self.h.view("a")["executionLease"]
        self.lease_id: str = lease["leaseId"]
        self.expires_at: str = lease["expiresAt"]
        self.started_at: str = lease["startsAt"]
        self.renewed_at: list[str] = []  # when the Group decided each renewal
        for n in range(1, renewals + 1):
            self.renewed_at.append(self.h.advance(1))
            expiry = self.renew()
            if not (last_receipt_lost and n == renewals):
                self.expires_at = expiry
        self.held_expiry: str = self.h.view("a")["executionLease"]["expiresAt"]
        self.disconnected_at = self.h.advance(lost_after - renewals)

    def renew(self) -> str:
        """The lease renewed now, as the Group decides it: its new expiry."""
        renewed = self.h.submit(W1, RENEW, self.h.owner_payload("a"), workItemId=item_id("a"))
        expiry: str = renewed.events[0]["payload"]["executionLease"]["expiresAt"]
        return expiry

    def binding(self, buffered_at: str, **overrides: Any) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agentId": W1.id,
            "groupId": GROUP,
            "workItemId": item_id("a"),
            "sessionEpoch": 1,
            "ownershipEpoch": 1,
            "executionLeaseId": self.lease_id,
            "disconnectedAt": self.disconnected_at,
            "bufferedAt": buffered_at,
            "graceDeadline": min(plus_seconds(self.disconnected_at, 120), self.expires_at),
            "executionLeaseExpiresAt": self.expires_at,
            "resourceUsageDelta": {"modelTokenLimit": 300},
        }
        data.update(overrides)
        return data

    def buffered(self, **overrides: Any) -> dict[str, Any]:
        """A checkpoint buffered now, offline (its binding as ``overrides`` change it)."""
        return self.binding(self.h.now, **overrides)

    def reconcile(
        self, binding: dict[str, Any], *, session: int = 2, **payload: Any
    ) -> dict[str, Any]:
        """The buffered checkpoint, re-signed now under the Worker's Session ``session``."""
        self.h.sessions[W1.id] = session
        return self.h.command(
            W1,
            CHECKPOINT,
            {
                "ownershipEpoch": 1,
                "leaseId": self.lease_id,
                "progress": progress(),
                **payload,
            },
            workItemId=item_id("a"),
            extensions={OFFLINE_EXTENSION: {"version": "0.1.0", "critical": True, "data": binding}},
        )


def test_after_reconnecting_the_buffered_checkpoint_is_charged_and_applied_at_once() -> None:
    run = Offline()
    run.h.advance(20)
    binding = run.buffered()
    run.h.advance(60)  # the Worker reconnects: a new Session, which revokes the old lease
    run.h.sessions[W1.id] = 2
    revoked = run.h.revoke_replaced_sessions()
    assert revoked is not None and run.h.view("a")["state"] == "queued"

    outcome = run.h.send(run.reconcile(binding))

    charge, checkpoint = outcome.events
    assert [charge["kind"], checkpoint["kind"]] == [RECORDED_KIND, "work.checkpointed"]
    assert charge["payload"]["sessionEpoch"] == 1  # the historical execution Session
    assert charge["payload"]["reconciliation"] == {
        "sessionEpoch": 2,
        "disconnectedAt": binding["disconnectedAt"],
        "bufferedAt": binding["bufferedAt"],
        "graceDeadline": binding["graceDeadline"],
    }
    assert charge["payload"]["delta"] == {"modelTokenLimit": 300}
    assert checkpoint["payload"]["leaseId"] == run.lease_id
    view = run.h.view("a")
    assert view["state"] == "queued" and view["checkpoint"]["leaseId"] == run.lease_id
    assert view["resourceUsage"]["cumulative"] == {"modelTokenLimit": 300}
    # A second buffered checkpoint of the same run is taken too; then the run restarts under
    # a new lease, after which nothing buffered under the old one is.
    run.h.send(run.reconcile(run.binding(plus_seconds(binding["bufferedAt"], 5))))
    run.h.start("a", W1)
    late = run.reconcile(run.binding(plus_seconds(binding["bufferedAt"], 6)))
    error = run.h.refuse(late, ErrorCode.WORK_LEASE_EXPIRED)
    assert (error.details or {})["reason"] == "offline_lease"
    assert replay(run.h.events).work_item_view(item_id("a")) == run.h.view("a")


def test_a_lease_the_group_never_revoked_takes_the_checkpoint_and_is_released() -> None:
    run = Offline()
    run.h.advance(5)
    binding = run.buffered(resourceUsageDelta={})
    outcome = run.h.send(run.reconcile(binding))
    assert [e["kind"] for e in outcome.events] == ["work.checkpointed"]  # nothing spent offline
    assert run.h.view("a")["state"] == "queued" and "executionLease" not in run.h.view("a")


@pytest.mark.parametrize(
    ("case", "code", "reason"),
    [
        ("buffered before the disconnection", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered at the grace deadline", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered before the lease", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("grace past the lease", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("grace past policy", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered in the future", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("buffered after the revocation", ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
        ("another lease", ErrorCode.WORK_LEASE_EXPIRED, "offline_lease"),
        ("another session", ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("another lease expiry", ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("another agent", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("another group", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("another work item", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("another ownership epoch", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("a missing member", ErrorCode.INVALID_COMMAND, "offline_binding"),
        ("a malformed time", ErrorCode.INVALID_COMMAND, "offline_binding"),
    ],
)
def test_progress_outside_the_lease_and_grace_or_not_bound_to_it_is_refused(
    case: str, code: ErrorCode, reason: str
) -> None:
    run = Offline()
    run.h.advance(20)
    now = run.h.now
    grace = plus_seconds(run.disconnected_at, 120)
    binding = {
        "buffered before the disconnection": lambda: run.binding(
            plus_seconds(run.disconnected_at, -1)
        ),
        "buffered at the grace deadline": lambda: run.binding(grace, graceDeadline=grace),
        "buffered before the lease": lambda: run.binding(
            plus_seconds(run.started_at, -1), disconnectedAt=plus_seconds(run.started_at, -2)
        ),
        "grace past the lease": lambda: run.binding(
            now, graceDeadline=plus_seconds(run.expires_at, 1)
        ),
        "grace past policy": lambda: run.binding(
            now, graceDeadline=plus_seconds(run.disconnected_at, MAX_GRACE_SECONDS + 1)
        ),
        "buffered in the future": lambda: run.binding(plus_seconds(now, 1)),
        "buffered after the revocation": lambda: run.binding(now),
        "another lease": lambda: run.buffered(executionLeaseId="urn:example:lease:other"),
        "another session": lambda: run.buffered(sessionEpoch=2),
        "another lease expiry": lambda: run.buffered(
            executionLeaseExpiresAt=plus_seconds(run.expires_at, 60)
        ),
        "another agent": lambda: run.buffered(agentId=W2.id),
        "another group": lambda: run.buffered(groupId="urn:example:group:beta"),
        "another work item": lambda: run.buffered(workItemId=item_id("b")),
        "another ownership epoch": lambda: run.buffered(ownershipEpoch=2),
        "a missing member": lambda: {
            k: v for k, v in run.buffered().items() if k != "graceDeadline"
        },
        "a malformed time": lambda: run.buffered(bufferedAt="yesterday"),
    }[case]()
    if case == "buffered after the revocation":
        run.h.sessions[W1.id] = 2
        assert run.h.revoke_replaced_sessions() is not None  # revoked at `now`, not after
    command = run.reconcile(binding)
    if case == "another lease":
        command["payload"]["leaseId"] = "urn:example:lease:other"
    error = run.h.refuse(command, code)
    assert (error.details or {})["reason"] == reason


def test_a_lease_its_owner_closed_or_an_owner_fenced_reconciles_nothing() -> None:
    closed = Offline()
    closed.h.advance(20)
    binding = closed.buffered()
    closed.h.submit(  # the owner itself checkpointed online: the lease is over
        W1, CHECKPOINT, closed.h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )
    error = closed.h.refuse(closed.reconcile(binding, session=1), ErrorCode.WORK_LEASE_EXPIRED)
    assert (error.details or {})["reason"] == "offline_lease"

    fenced = Offline()
    fenced.h.advance(20)
    binding = fenced.buffered()
    [timer] = [t for t in fenced.h.authority.timers() if t.kind == "execution_lease"]
    fenced.h.now = fenced.expires_at
    assert fenced.h.fire(item_id("a"), "execution_lease", timer.token) is not None
    fenced.h.refuse(fenced.reconcile(binding), ErrorCode.WORK_STALE_OWNERSHIP)


def test_an_offline_delta_over_budget_refuses_charge_and_checkpoint() -> None:
    run = Offline()
    run.h.advance(20)
    over = run.buffered(resourceUsageDelta={"modelTokenLimit": 1001})
    run.h.refuse(run.reconcile(over), ErrorCode.BUDGET_EXCEEDED)
    assert run.h.view("a")["state"] == "active"
    zero = run.buffered(resourceUsageDelta={"modelTokenLimit": 0})
    run.h.refuse(run.reconcile(zero), ErrorCode.INVALID_COMMAND)
    effect = run.buffered(resourceUsageDelta={"externalSideEffectLimit": 1})
    error = run.h.refuse(run.reconcile(effect), ErrorCode.AUTH_FORBIDDEN)
    assert (error.details or {})["reason"] == "offline_side_effect"


def test_the_binding_is_interpreted_on_checkpoints_under_current_rules_only() -> None:
    run = Offline()
    run.h.advance(20)
    on_renewal = run.reconcile(run.buffered(), session=1)
    on_renewal["kind"] = "ext.missionweaveprotocol.core.execution_lease_renew"
    error = run.h.refuse(on_renewal, ErrorCode.UNKNOWN_CRITICAL_EXTENSION)
    assert (error.details or {})["extensions"] == [OFFLINE_EXTENSION]
    run.h.rules = RULES_LEDGER
    run.h.refuse(run.reconcile(run.buffered()), ErrorCode.UNKNOWN_CRITICAL_EXTENSION)


# --- an earlier expiry of the same lease (rules RULES_OFFLINE_RENEWALS) --------------------------


def _reconciled_after_a_new_session(run: Offline) -> Outcome:
    """The run buffers a checkpoint 20 s after losing the Group, reconnects a minute later under
    a new Session (which revokes its lease) and reconciles it."""
    run.h.advance(20)
    binding = run.buffered()
    run.h.advance(60)
    run.h.sessions[W1.id] = 2
    assert run.h.revoke_replaced_sessions() is not None
    return run.h.send(run.reconcile(binding))


@pytest.mark.parametrize("renewals", [1, 3])
def test_a_binding_stating_the_expiry_before_a_renewal_whose_receipt_was_lost_is_taken(
    renewals: int,
) -> None:
    # Given two runs alike but for their last renewal's receipt, which one never received.
    lost = Offline(renewals=renewals, last_receipt_lost=True)
    seen = Offline(renewals=renewals)
    assert lost.held_expiry == seen.held_expiry == seen.expires_at != lost.expires_at

    # When each reconciles the checkpoint it buffered offline,
    taken, exact = _reconciled_after_a_new_session(lost), _reconciled_after_a_new_session(seen)

    # Then the Group charges and records the one bound to the earlier expiry as the exact one.
    assert [e["kind"] for e in taken.events] == [RECORDED_KIND, "work.checkpointed"]
    assert [(e["kind"], e["payload"]) for e in taken.events] == [
        (e["kind"], e["payload"]) for e in exact.events
    ]
    assert lost.h.view("a") == seen.h.view("a")
    assert lost.h.view("a")["resourceUsage"]["cumulative"] == {"modelTokenLimit": 300}
    assert replay(lost.h.events).work_item_view(item_id("a")) == lost.h.view("a")


def test_under_the_previous_rules_the_binding_must_state_the_lease_s_current_expiry() -> None:
    # Given a run that never received its renewal's receipt, in a Group that pinned the rules
    # before RULES_OFFLINE_RENEWALS,
    assert RULES_CHILD_USAGE == RULES_OFFLINE_RENEWALS - 1
    run = Offline(renewals=1, last_receipt_lost=True)
    run.h.rules = RULES_CHILD_USAGE
    run.h.advance(20)

    # When it reconciles a checkpoint bound to the expiry it knew, then it is refused;
    error = run.h.refuse(run.reconcile(run.buffered()), ErrorCode.INVALID_COMMAND)
    details = error.details or {}
    assert (details["reason"], details["member"]) == (
        "offline_lease_facts",
        "executionLeaseExpiresAt",
    )
    # and bound to the lease's current expiry it is taken.
    outcome = run.h.send(run.reconcile(run.buffered(executionLeaseExpiresAt=run.held_expiry)))
    assert [e["kind"] for e in outcome.events] == [RECORDED_KIND, "work.checkpointed"]


@pytest.mark.parametrize(
    ("case", "renewals", "code", "reason"),
    [
        ("after the lease's current expiry", 2, ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("at the lease's start", 2, ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("before the lease's start", 2, ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("earlier, of a lease never renewed", 0, ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("at its only renewal", 1, ErrorCode.INVALID_COMMAND, "offline_lease_facts"),
        ("earlier, passed by the grace", 1, ErrorCode.WORK_LEASE_EXPIRED, "offline_window"),
    ],
)
def test_a_stated_expiry_the_lease_never_had_or_the_run_did_not_keep_to_is_refused(
    case: str, renewals: int, code: ErrorCode, reason: str
) -> None:
    # Given a run whose last renewal's receipt (if any) never reached it,
    run = Offline(renewals=renewals, last_receipt_lost=True)
    run.h.advance(20)
    assert run.h.rules >= RULES_OFFLINE_RENEWALS
    start = run.started_at
    # when it reconciles a checkpoint whose binding states (inside a window otherwise kept)
    binding = {
        "after the lease's current expiry": lambda: run.buffered(
            executionLeaseExpiresAt=plus_seconds(run.held_expiry, 1)
        ),
        "at the lease's start": lambda: run.buffered(executionLeaseExpiresAt=start),
        "before the lease's start": lambda: run.buffered(
            executionLeaseExpiresAt=plus_seconds(start, -1)
        ),
        "earlier, of a lease never renewed": lambda: run.buffered(
            executionLeaseExpiresAt=plus_seconds(run.held_expiry, -1)
        ),
        # Lost from the Group just as it started, by the run's clock, and buffered at once:
        # the expiry the only renewal replaced cannot be at or before that renewal.
        "at its only renewal": lambda: run.binding(
            start,
            disconnectedAt=start,
            graceDeadline=run.renewed_at[0],
            executionLeaseExpiresAt=run.renewed_at[0],
        ),
        "earlier, passed by the grace": lambda: run.buffered(
            graceDeadline=plus_seconds(run.expires_at, 1)
        ),
    }[case]()

    # then it is refused, changing nothing.
    error = run.h.refuse(run.reconcile(binding), code)
    assert (error.details or {})["reason"] == reason
