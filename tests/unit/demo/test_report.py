"""The proof of concept's report: a check is named once, and one failed check fails it all."""

from __future__ import annotations

import pytest

from mwp.demo.report import Report


def test_the_report_passes_only_when_every_check_passed() -> None:
    said: list[str] = []
    report = Report(said.append)
    assert not report.to_json()["ok"]  # no check proves nothing
    report.check("stage.requirements", True, "verified", events=[{"sequence": 3}])
    assert report.to_json()["ok"] and report.to_json()["passed"] == 1
    report.check("failure.duplicate_delivery", False, "appended twice", sequence=[4, 6])
    summary = report.to_json()
    assert not summary["ok"] and summary["failed"] == ["failure.duplicate_delivery"]
    assert summary["checks"][1]["proof"] == {"sequence": [4, 6]}
    assert said == [
        "  PASS  stage.requirements: verified",
        "  FAIL  failure.duplicate_delivery: appended twice",
    ]


def test_a_check_is_recorded_once() -> None:
    report = Report(lambda _: None)
    report.check("console.login", True, "logged in")
    with pytest.raises(ValueError, match="twice"):
        report.check("console.login", True, "again")


def test_a_part_joins_in_the_order_joined_not_the_order_checked() -> None:
    said: list[str] = []
    report = Report(said.append)
    beside = report.part()
    beside.check("archival.signed_snapshot", True, "archived")  # checked first, beside
    report.check("human.approves_revision", True, "approved")
    assert [c.name for c in report.checks] == ["human.approves_revision"]
    report.join(beside)
    assert [c["name"] for c in report.to_json()["checks"]] == [
        "human.approves_revision",
        "archival.signed_snapshot",
    ]
    assert said[0] == "  PASS  archival.signed_snapshot: archived"  # said when it was checked
    report.join(beside)  # joined once
    assert len(report.checks) == 2


def test_a_check_in_a_part_is_still_recorded_once() -> None:
    report = Report(lambda _: None)
    beside = report.part()
    beside.check("console.login", True, "logged in")
    report.check("console.login", True, "again")
    with pytest.raises(ValueError, match="twice"):
        report.join(beside)
