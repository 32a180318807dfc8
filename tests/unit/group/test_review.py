"""Evidence-based review (spec 13.2, 10.2): accepting or rejecting a submitted result is a
review record citing, per acceptance criterion, the Submission's Evidence, under RULES_LEDGER."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.client.review import rejection_payload, review_record
from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_CONTEXT
from tests.unit.group.harness import COORD, W2, Harness, item_id, mission_harness

TESTS = "urn:example:evidence:tests"
REVIEWED = "urn:example:evidence:review"
REJECTION = {"reason": "The tests fail.", "failureEvidenceIds": [TESTS]}


def _submitted(rules: int | None = None) -> Harness:
    h = mission_harness()
    if rules is not None:
        h.rules = rules
    h.drive("a", "submitted")
    return h


def _accept(h: Harness, review: dict[str, Any], code: ErrorCode = ErrorCode.INVALID_COMMAND) -> Any:
    return h.reject(code, COORD, "work.accept_result", {"review": review}, workItemId=item_id("a"))


def _criteria(*entries: tuple[str, list[str], str]) -> dict[str, Any]:
    return {"criteria": [{"criterionId": c, "evidenceIds": e, "result": r} for c, e, r in entries]}


# --- acceptance ----------------------------------------------------------------------------------


def test_given_a_submission_when_every_criterion_passed_then_verified_with_the_record() -> None:
    h = _submitted()
    h.advance(30)
    outcome = h.submit(
        COORD,
        "work.accept_result",
        {
            "review": _criteria(
                ("reviewed", [REVIEWED], "passed"), ("tests-pass", [TESTS], "passed")
            )
        },
        workItemId=item_id("a"),
    )

    (event,) = outcome.events
    review = event["payload"]["review"]
    assert review["decision"] == "accepted" and review["reviewer"] == COORD.to_json()
    assert review["reviewedAt"] == h.now
    assert review["submittedAt"] == h.view("a")["submission"]["submittedAt"]
    # In the contract's order, whatever order the Coordinator sent them in.
    assert review["criteria"] == [
        {"criterionId": "tests-pass", "evidenceIds": [TESTS], "result": "passed"},
        {"criterionId": "reviewed", "evidenceIds": [REVIEWED], "result": "passed"},
    ]
    view = h.view("a")
    assert view["state"] == "verified" and view["result"]["review"] == review


def test_given_a_submission_when_the_review_is_missing_then_refused() -> None:
    h = _submitted()
    error = h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "work.accept_result", {}, workItemId=item_id("a")
    )
    assert error.details == {"member": "payload.review", "reason": "is required"}


def test_given_a_submission_when_the_review_omits_a_criterion_then_refused() -> None:
    h = _submitted()
    error = _accept(h, _criteria(("tests-pass", [TESTS], "passed")))
    assert error.details is not None and error.details["unreviewedCriteria"] == ["reviewed"]


def test_given_a_submission_when_a_review_names_unknown_or_repeated_criteria_then_refused() -> None:
    h = _submitted()
    full = [("tests-pass", [TESTS], "passed"), ("reviewed", [REVIEWED], "passed")]
    error = _accept(h, _criteria(*full, ("style", [TESTS], "passed")))
    assert error.details is not None and error.details["unknownCriteria"] == ["style"]
    error = _accept(h, _criteria(*full, ("tests-pass", [TESTS], "passed")))
    assert error.details is not None and error.details["repeatedCriteria"] == ["tests-pass"]


def test_given_a_submission_when_the_review_cites_evidence_not_in_it_then_refused() -> None:
    h = _submitted()
    forged = "urn:example:evidence:elsewhere"
    error = _accept(
        h, _criteria(("tests-pass", [TESTS, forged], "passed"), ("reviewed", [REVIEWED], "passed"))
    )
    assert error.details is not None and error.details["unknownEvidenceIds"] == [forged]
    # Evidence of the Submission, but mapped to another criterion.
    error = _accept(
        h, _criteria(("tests-pass", [REVIEWED], "passed"), ("reviewed", [REVIEWED], "passed"))
    )
    assert error.details is not None and error.details["evidenceIds"] == [REVIEWED]
    # A criterion citing nothing.
    _accept(h, _criteria(("tests-pass", [], "passed"), ("reviewed", [REVIEWED], "passed")))


@pytest.mark.parametrize("result", ["failed", "inconclusive"])
def test_given_a_submission_when_accepting_with_a_criterion_not_passed_then_refused(
    result: str,
) -> None:
    h = _submitted()
    error = _accept(
        h, _criteria(("tests-pass", [TESTS], result), ("reviewed", [REVIEWED], "passed"))
    )
    assert error.details is not None and error.details["unmetCriteria"] == ["tests-pass"]


def test_given_a_submission_when_a_review_result_or_member_is_undefined_then_refused() -> None:
    h = _submitted()
    _accept(h, _criteria(("tests-pass", [TESTS], "ok"), ("reviewed", [REVIEWED], "passed")))
    review = h.review("a")
    review["criteria"][0]["reasoning"] = "step by step..."  # no member for reasoning
    error = _accept(h, review)
    assert error.details is not None and error.details["unknown"] == ["reasoning"]


# --- rejection -----------------------------------------------------------------------------------


def test_given_a_submission_when_rejected_with_a_failed_criterion_then_failed_to_re_offer() -> None:
    h = _submitted()
    review = h.review("a", {"tests-pass": "failed"})
    review["criteria"][0]["comments"] = "Two tests fail on an empty page."
    outcome = h.submit(COORD, "work.fail", {**REJECTION, "review": review}, workItemId=item_id("a"))

    (event,) = outcome.events
    assert event["kind"] == "work.failed"
    record = event["payload"]["review"]
    assert record["decision"] == "rejected" and event["payload"]["reason"] == REJECTION["reason"]
    assert record["criteria"][0] == {
        "criterionId": "tests-pass",
        "evidenceIds": [TESTS],
        "result": "failed",
        "comments": "Two tests fail on an empty page.",
    }
    assert h.view("a")["state"] == "failed" and h.view("a")["failure"]["review"] == record
    # failed returns control to the Coordinator: a new offer (spec 10.2).
    h.offer("a", W2)
    assert h.view("a")["state"] == "offered"


def test_given_a_submission_when_a_rejection_lacks_a_review_or_a_failure_then_refused() -> None:
    h = _submitted()
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.fail", REJECTION, workItemId=item_id("a"))
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.fail",
        {**REJECTION, "review": h.review("a")},
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["member"].endswith("result")
    # A rejection's review obeys the same citation rules as an acceptance's.
    review = h.review("a", {"tests-pass": "failed"})
    review["criteria"].pop()
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.fail",
        {**REJECTION, "review": review},
        workItemId=item_id("a"),
    )


def test_given_an_item_not_submitted_when_failed_with_a_review_then_refused() -> None:
    h = mission_harness()
    h.drive("a", "active")
    review = _criteria(("tests-pass", [TESTS], "failed"), ("reviewed", [REVIEWED], "failed"))
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.fail",
        {**REJECTION, "review": review},
        workItemId=item_id("a"),
    )
    h.submit(COORD, "work.fail", REJECTION, workItemId=item_id("a"))  # no review: as before


# --- older rules ---------------------------------------------------------------------------------


def test_given_older_rules_when_accepting_or_rejecting_then_decided_as_before() -> None:
    h = _submitted(RULES_CONTEXT)
    review = h.review("a")
    _accept(h, review)  # the member is unknown to these rules
    outcome = h.submit(COORD, "work.accept_result", {}, workItemId=item_id("a"))
    assert "review" not in outcome.events[0]["payload"]

    h = _submitted(RULES_CONTEXT)
    outcome = h.submit(COORD, "work.fail", REJECTION, workItemId=item_id("a"))
    assert "review" not in outcome.events[0]["payload"]


# --- the client SDK's builders -------------------------------------------------------------------


def test_the_client_builds_reviews_the_group_accepts() -> None:
    h = _submitted()
    view = h.view("a")
    rejection = rejection_payload(view, "The tests fail.", {"tests-pass": "failed"})
    assert rejection["failureEvidenceIds"] == [TESTS, REVIEWED]
    h.submit(COORD, "work.fail", rejection, workItemId=item_id("a"))
    assert h.view("a")["failure"]["failureCode"] == "RESULT_REJECTED"

    h = _submitted()
    review = review_record(h.view("a"), comments={"reviewed": "Read it twice."})
    assert review["criteria"][1]["comments"] == "Read it twice."
    h.submit(COORD, "work.accept_result", {"review": review}, workItemId=item_id("a"))
    assert h.view("a")["state"] == "verified"
