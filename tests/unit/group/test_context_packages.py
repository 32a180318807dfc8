"""Context Packages (spec 8, 13.3; MWP-WRK-027, MWP-MSN-005): the Coordinator publishes a
signed, versioned, scoped package; from ``RULES_CONTEXT`` on a new Worker's offer and a
replacement Coordinator name one the Group published (an offer may carry it inline)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mwp.client import Identity
from mwp.client.context_packages import offer_context_package
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.api import CURRENT_RULES, RULES_ARCHIVE, RULES_CONTEXT, RULES_LEDGER
from mwp.core.group.context_package import (
    PUBLISH_KIND,
    PUBLISHED_KIND,
    embedded_context_package,
)
from mwp.core.group.ids import event_id
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import PROFILES, VerificationError, sign, verify_value
from mwp.core.wire.ed25519 import SigningKey
from tests.event_log_samples import ORG, binding
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    COORD2,
    GROUP,
    OWNER,
    W1,
    W3,
    Harness,
    item_id,
    mission_harness,
    selection_basis,
)
from tests.unit.group.harness import contract as work_contract

PACKAGE = "urn:example:context-package:brief"
SCOPED = "urn:example:context-package:scoped"


def _publish(h: Harness, **overrides: Any) -> dict[str, Any]:
    package = h.context_package(overrides.pop("package_id", PACKAGE), **overrides)
    h.publish_context_package(package)
    return package


def _refuse_package(h: Harness, code: ErrorCode, **overrides: Any) -> MwpError:
    package = h.context_package(overrides.pop("package_id", PACKAGE), **overrides)
    return h.reject(code, COORD, PUBLISH_KIND, {"contextPackage": package})


def _offer_payload(h: Harness, worker: Any = W3, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "candidates": [{"agentId": worker.id, "selectionBasis": selection_basis()}],
        "expiresAt": "2026-07-15T00:10:00Z",
    }
    payload.update(extra)
    return payload


def _membership(h: Harness, agent_id: str) -> dict[str, Any]:
    return next(
        m for m in h.authority.mission_view()["memberships"] if m["member"]["id"] == agent_id
    )


# --- publication ---------------------------------------------------------------------------------


def test_the_coordinator_publishes_a_mission_wide_package() -> None:
    h = mission_harness()
    revision = h.authority.mission_view()["revision"]
    package = h.context_package(PACKAGE)
    outcome = h.publish_context_package(package)
    [event] = outcome.events
    assert event["kind"] == PUBLISHED_KIND
    assert event["payload"] == {"contextPackage": package}
    assert "workItemId" not in event
    assert h.authority.mission_view()["revision"] == revision + 1
    assert h.authority._state.context_packages == {
        PACKAGE: {"version": 1, "sequence": event["sequence"]}
    }


def test_a_package_scoped_to_a_work_item_is_that_item_s_event() -> None:
    h = mission_harness()
    h.authorize("a")
    revision = h.view("a")["revision"]
    outcome = h.publish_context_package(h.context_package(SCOPED, workItemId=item_id("a")))
    assert outcome.events[0]["workItemId"] == item_id("a")
    assert h.view("a")["revision"] == revision + 1
    assert h.authority._state.context_packages[SCOPED]["workItemId"] == item_id("a")


def test_a_new_version_follows_its_predecessor_in_the_same_scope() -> None:
    h = mission_harness()
    _publish(h)
    h.publish_context_package(
        h.context_package(
            "urn:example:context-package:brief-2", version=2, previousContextPackageId=PACKAGE
        )
    )
    assert (
        h.authority._state.context_packages["urn:example:context-package:brief-2"]["version"] == 2
    )


def test_a_retried_publish_gets_its_receipt_again() -> None:
    h = mission_harness()
    command = h.command(COORD, PUBLISH_KIND, {"contextPackage": h.context_package(PACKAGE)})
    first = h.send(command)
    again = h.send(command)
    assert again.duplicate and again.receipt == first.receipt


def test_a_package_may_cite_artifacts_published_in_the_group() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.publish("a")
    h.publish_context_package(h.context_package(PACKAGE, artifactHashes=[ARTIFACT_A]))


def test_published_packages_survive_snapshot_and_replay() -> None:
    h = mission_harness()
    _publish(h)
    h.authorize("a")
    snapshot = json.loads(json.dumps(h.authority.snapshot()))
    restored = GroupAuthority.restore(snapshot)
    assert restored.snapshot() == h.authority.snapshot()
    [kept] = snapshot["state"]["contextPackages"]
    assert kept["contextPackageId"] == PACKAGE and kept["version"] == 1
    assert replay(h.events).snapshot()["state"]["contextPackages"] == [kept]
    # A snapshot from before packages existed restores with none.
    old = json.loads(json.dumps(snapshot))
    del old["state"]["contextPackages"]
    for item in old["state"]["workItems"]:
        del item["contractEvents"]
    older = GroupAuthority.restore(old)
    assert older._state.context_packages == {}
    assert older.work_item_view(item_id("a"))["contractEvents"] == []


# --- refused publications ------------------------------------------------------------------------


def test_only_the_coordinator_or_owner_publishes() -> None:
    h = mission_harness()
    package = h.context_package(PACKAGE, generator=W1)
    h.reject(ErrorCode.AUTH_FORBIDDEN, W1, PUBLISH_KIND, {"contextPackage": package})


@pytest.mark.parametrize("value", ["x", [1], None])
def test_a_publish_without_a_package_object_is_invalid(value: Any) -> None:
    h = mission_harness()
    payload = {} if value is None else {"contextPackage": value}
    error = h.reject(ErrorCode.INVALID_COMMAND, COORD, PUBLISH_KIND, payload)
    assert error.details is not None and error.details["member"] == "payload.contextPackage"


def test_a_package_against_its_schema_is_refused() -> None:
    h = mission_harness()
    _refuse_package(h, ErrorCode.SCHEMA_VALIDATION_FAILED, summary=None)
    _refuse_package(h, ErrorCode.SCHEMA_VALIDATION_FAILED, version=0)


def test_the_generator_must_be_the_actor() -> None:
    h = mission_harness()
    package = h.context_package(PACKAGE, generator=COORD2)
    error = h.reject(ErrorCode.INVALID_COMMAND, COORD, PUBLISH_KIND, {"contextPackage": package})
    assert error.details is not None
    assert error.details["member"] == "payload.contextPackage.generatedBy"


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("missionId", "urn:example:mission:other"),
        ("groupId", "urn:example:group:other"),
        ("workItemId", item_id("nowhere")),
        ("artifactHashes", [ARTIFACT_A]),
    ],
)
def test_a_package_describes_this_group_and_what_it_holds(member: str, value: Any) -> None:
    h = mission_harness()
    error = _refuse_package(h, ErrorCode.INVALID_COMMAND, **{member: value})
    assert error.details is not None
    assert error.details["member"] == f"payload.contextPackage.{member}"


@pytest.mark.parametrize(
    ("first", "last", "ids"),
    [
        (3, 2, [2]),  # from after to
        (1, 99, [1]),  # beyond the log
        (1, 1, [1, 2]),  # more IDs than the range holds
        (1, 2, [3]),  # an Event outside the range
    ],
)
def test_the_cited_range_lies_within_the_group_log(first: int, last: int, ids: list[int]) -> None:
    h = mission_harness()
    cited = {
        "fromSequence": first,
        "toSequence": last,
        "eventIds": [event_id(GROUP, s) for s in ids],
    }
    error = _refuse_package(h, ErrorCode.INVALID_COMMAND, sourceEventRange=cited)
    assert error.details is not None
    assert error.details["member"].startswith("payload.contextPackage.sourceEventRange")


def test_a_package_id_is_published_once() -> None:
    h = mission_harness()
    _publish(h)
    error = _refuse_package(h, ErrorCode.INVALID_COMMAND, summary="Another text.")
    assert error.details is not None and error.details["reason"] == "context_package_exists"


@pytest.mark.parametrize(
    ("overrides", "member"),
    [
        ({"version": 2}, "version"),  # no predecessor: version 1
        ({"version": 2, "previousContextPackageId": "urn:example:cp:none"}, "previous"),
        ({"version": 3, "previousContextPackageId": PACKAGE}, "version"),
        (
            {"version": 2, "previousContextPackageId": PACKAGE, "workItemId": item_id("a")},
            "workItemId",
        ),
    ],
)
def test_versions_continue_their_predecessor(overrides: dict[str, Any], member: str) -> None:
    h = mission_harness()
    h.authorize("a")
    _publish(h)
    error = _refuse_package(
        h, ErrorCode.INVALID_COMMAND, package_id="urn:example:cp:next", **overrides
    )
    assert error.details is not None
    assert error.details["member"].startswith(f"payload.contextPackage.{member}")


def test_a_closed_mission_publishes_nothing() -> None:
    h = mission_harness()
    h.submit(OWNER, "mission.cancel", {"reason": "No longer needed."})
    _refuse_package(h, ErrorCode.INVALID_STATE_TRANSITION)


def test_older_rules_do_not_know_the_kind() -> None:
    h = mission_harness()
    h.rules = RULES_ARCHIVE
    error = _refuse_package(h, ErrorCode.INVALID_COMMAND)
    assert error.details is None or "member" not in error.details


# --- offers to new Workers -----------------------------------------------------------------------


def test_an_offer_to_a_new_worker_names_a_published_package() -> None:
    h = mission_harness()
    h.authorize("a")
    _publish(h)
    h.submit(
        COORD, "work.offer", _offer_payload(h, contextPackageId=PACKAGE), workItemId=item_id("a")
    )
    assert _membership(h, W3.id)["contextPackageId"] == PACKAGE


def test_an_offer_naming_an_unpublished_package_is_refused_naming_the_member() -> None:
    h = mission_harness()
    h.authorize("a")
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        _offer_payload(h, contextPackageId="urn:example:context-package:random"),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["agentId"] == W3.id


def test_an_offer_naming_another_item_s_package_is_refused() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    h.publish_context_package(h.context_package(SCOPED, workItemId=item_id("b")))
    payload = _offer_payload(h, contextPackageId=SCOPED)
    error = h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "work.offer", payload, workItemId=item_id("a")
    )
    assert error.details is not None and error.details["agentId"] == W3.id
    h.submit(COORD, "work.offer", payload, workItemId=item_id("b"))


def test_older_rules_take_any_package_id() -> None:
    h = mission_harness()
    h.rules = RULES_ARCHIVE
    h.authorize("a")
    payload = _offer_payload(h, contextPackageId="urn:example:context-package:random")
    h.submit(COORD, "work.offer", payload, workItemId=item_id("a"))
    assert _membership(h, W3.id)["contextPackageId"] == "urn:example:context-package:random"


def test_an_offer_carries_its_package_inline_published_before_the_grant() -> None:
    h = mission_harness()
    h.authorize("a")
    package = h.context_package(SCOPED, workItemId=item_id("a"))
    outcome = h.submit(
        COORD, "work.offer", _offer_payload(h, contextPackage=package), workItemId=item_id("a")
    )
    assert [e["kind"] for e in outcome.events] == [
        PUBLISHED_KIND,
        "membership.changed",
        "work.offer.created",
    ]
    assert outcome.events[0]["payload"]["contextPackage"] == package
    assert outcome.events[2]["payload"]["contextPackageId"] == SCOPED
    assert _membership(h, W3.id)["contextPackageId"] == SCOPED
    assert SCOPED in h.packages()


def test_an_inline_package_is_checked_as_a_published_one() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b")
    for package, code in (
        (h.context_package(SCOPED, summary=None), ErrorCode.SCHEMA_VALIDATION_FAILED),
        (h.context_package(SCOPED, generator=COORD2), ErrorCode.INVALID_COMMAND),
        (h.context_package(SCOPED, workItemId=item_id("b")), ErrorCode.INVALID_COMMAND),
    ):
        payload = _offer_payload(h, contextPackage=package)
        h.reject(code, COORD, "work.offer", payload, workItemId=item_id("a"))
    both = _offer_payload(h, contextPackage=h.context_package(SCOPED), contextPackageId=SCOPED)
    error = h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.offer", both, workItemId=item_id("a"))
    assert error.details is not None and error.details["member"] == "payload.contextPackageId"


def test_older_rules_refuse_an_inline_package() -> None:
    h = mission_harness()
    h.rules = RULES_ARCHIVE
    h.authorize("a")
    payload = _offer_payload(h, contextPackage=h.context_package(SCOPED))
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.offer", payload, workItemId=item_id("a"))


def test_an_offer_to_members_needs_no_package() -> None:
    h = mission_harness()  # W1 and W2 are members
    h.authorize("a")
    payload = _offer_payload(h, W1, contextPackageId=None)
    del payload["contextPackageId"]
    h.submit(COORD, "work.offer", payload, workItemId=item_id("a"))
    assert h.packages() == set()


# --- replacement Coordinators --------------------------------------------------------------------


def test_a_replacement_coordinator_names_a_published_package() -> None:
    h = mission_harness()
    _publish(h)
    outcome = h.submit(
        OWNER, "mission.assign_coordinator", {"agentId": COORD2.id, "contextPackageId": PACKAGE}
    )
    assert outcome.events[-1]["payload"]["contextPackageId"] == PACKAGE


def test_a_replacement_coordinator_naming_an_unpublished_package_is_refused() -> None:
    h = mission_harness()
    payload = {"agentId": COORD2.id, "contextPackageId": "urn:example:context-package:random"}
    error = h.reject(ErrorCode.INVALID_COMMAND, OWNER, "mission.assign_coordinator", payload)
    assert error.details is not None and error.details["agentId"] == COORD2.id
    h.rules = RULES_ARCHIVE  # older rules took any ID
    h.submit(OWNER, "mission.assign_coordinator", payload)


# --- the WorkItem view's contract Events ---------------------------------------------------------


def test_the_view_lists_the_events_that_stated_the_contract() -> None:
    h = mission_harness()
    authorized = h.authorize("a").events[-1]
    view = h.view("a")
    assert view["contractEvents"] == [
        {"sequence": authorized["sequence"], "eventId": authorized["eventId"]}
    ]
    revised = h.offer(
        "a", W1, contract=work_contract(contractVersion=2, goal="Implement keyset pagination.")
    ).events[0]
    assert revised["kind"] == "work.contract.revised"
    assert h.view("a")["contractEvents"][-1] == {
        "sequence": revised["sequence"],
        "eventId": revised["eventId"],
    }
    assert len(h.view("a")["contractEvents"]) == 2


# --- the shell's part: the package's own signature -----------------------------------------------


def test_the_shell_verifies_the_embedded_package_against_registry_evidence() -> None:
    key_id = "urn:example:key:coordinator"
    key = SigningKey(bytes(range(7, 39)))
    evidence_ = RegistryEvidence.from_bindings(ORG, [binding(key_id, COORD, key)])
    h = mission_harness()
    package = sign(h.context_package(PACKAGE), "context-package", key_id, key)
    payload = {"contextPackage": package}
    assert embedded_context_package(PUBLISH_KIND, payload) is package
    assert embedded_context_package("work.offer", payload) is package
    assert embedded_context_package("work.offer", {"contextPackageId": PACKAGE}) is None
    assert embedded_context_package("message.post", payload) is None
    assert verify_value(package, PROFILES["context-package"], evidence_).principal == COORD
    with pytest.raises(VerificationError) as failed:
        verify_value({**package, "summary": "Altered."}, PROFILES["context-package"], evidence_)
    assert failed.value.code == ErrorCode.AUTH_INVALID_SIGNATURE
    with pytest.raises(MwpError):
        embedded_context_package(PUBLISH_KIND, {})


def test_the_harness_decides_under_the_current_rules() -> None:
    assert Harness().rules == CURRENT_RULES >= RULES_LEDGER > RULES_CONTEXT


def test_a_named_package_is_the_group_s_even_for_members() -> None:
    h = mission_harness()
    h.authorize("a")
    payload = _offer_payload(h, W1, contextPackageId="urn:example:context-package:random")
    error = h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "work.offer", payload, workItemId=item_id("a")
    )
    assert error.details is not None and error.details["agentId"] == W1.id


# --- the client SDK's package for an offer -------------------------------------------------------


def test_the_sdk_builds_a_package_the_group_accepts_for_an_offer() -> None:
    h = mission_harness()
    h.authorize("a", inputArtifacts=[ARTIFACT_A])
    h.offer("a", W1, contract=work_contract(contractVersion=2, inputArtifacts=[ARTIFACT_A]))
    view = h.view("a")
    coordinator = Identity.generate(COORD)
    package = offer_context_package(view, coordinator, published_artifacts=set())
    cited = view["contractEvents"]
    assert package["sourceEventRange"] == {
        "fromSequence": cited[0]["sequence"],
        "toSequence": cited[-1]["sequence"],
        "eventIds": [e["eventId"] for e in cited],
    }
    assert package["artifactHashes"] == []  # not published here: left out
    assert package["summary"].startswith(view["contract"]["goal"])
    assert package["generatedBy"] == COORD.to_json() and package["workItemId"] == item_id("a")
    outcome = h.submit(
        COORD, "work.offer", _offer_payload(h, contextPackage=package), workItemId=item_id("a")
    )
    assert outcome.events[0]["kind"] == PUBLISHED_KIND
    # Its next version follows it.
    again = offer_context_package(
        h.view("a"), coordinator, previous=package, published_artifacts=h.published()
    )
    assert (again["version"], again["previousContextPackageId"]) == (
        2,
        package["contextPackageId"],
    )
    h.publish_context_package(again)
    # A view from before packages (no contractEvents) cannot be cited.
    with pytest.raises(ValueError, match="contractEvents"):
        offer_context_package({**view, "contractEvents": []}, coordinator)


def test_a_package_for_a_newcomer_cites_where_each_dependency_stands() -> None:
    """A Worker new to the Group, offered an item whose dependency was verified before it
    joined, would never see that verification: the SDK's package cites the Event that accepted
    the dependency's result (named by its view, and by the record the Group keeps once the
    item settles), and a dependency not yet verified by the Events that stated its contract.
    The Group takes the package with the offer (MWP-MSN-012)."""
    h = mission_harness()
    h.drive("a", "submitted")
    accepted = next(e for e in h.accept_result("a").events if e["kind"] == "work.result.accepted")
    where = {"sequence": accepted["sequence"], "eventId": accepted["eventId"]}
    assert h.view("a")["result"]["acceptedEvent"] == where
    settled = h.authority.settled_work_item(item_id("a"))
    assert settled is not None and settled["acceptedSequence"] == accepted["sequence"]
    h.authorize("b", dependencyWorkItemIds=[item_id("a")])
    h.authorize("c", dependencyWorkItemIds=[item_id("a"), item_id("b")])
    coordinator = Identity.generate(COORD)
    package = offer_context_package(h.view("c"), coordinator, dependencies=[settled, h.view("b")])
    cited = package["sourceEventRange"]["eventIds"]
    assert cited == [
        accepted["eventId"],
        *(e["eventId"] for e in h.view("b")["contractEvents"]),
        *(e["eventId"] for e in h.view("c")["contractEvents"]),
    ]
    outcome = h.submit(
        COORD, "work.offer", _offer_payload(h, contextPackage=package), workItemId=item_id("c")
    )
    assert outcome.events[0]["kind"] == PUBLISHED_KIND
    # Without the dependencies, only the item's own contract is cited.
    alone = offer_context_package(h.view("b"), coordinator)["sourceEventRange"]["eventIds"]
    assert accepted["eventId"] not in alone
