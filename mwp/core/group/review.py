"""Evidence-based review of a submitted result (spec 13.2, 10.2).

From rules ``RULES_LEDGER`` on, the Coordinator's verdict on a submission is a review record:
``work.accept_result`` (``submitted`` -> ``verified``) and its rejection, a Coordinator's
``work.fail`` of a ``submitted`` item (-> ``failed``, whence a new ``work.offer`` may follow),
both carry ``payload.review.criteria``: one entry per acceptance criterion of the contract,
each citing the Submission's Evidence mapped to that criterion (``evidenceIds``) and the
review's ``result`` for it (``passed``, ``failed`` or ``inconclusive``). The Group refuses a
review that omits or repeats a criterion, names one the contract does not define, cites
Evidence the Submission does not map to it, accepts with a criterion not ``passed``, or
rejects with every criterion ``passed``. The Event (``work.result.accepted`` or
``work.failed``) carries the record the Group completed with the reviewer, the verdict and
the times, so the MissionOwner's Approval can read what was checked.

The record holds structured results and short comments only: no member for reasoning
(spec 13.2, last paragraph). Under older rules a ``review`` member is refused as unknown, as
the door refused it then.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from mwp.core.group.api import RULES_LEDGER, AuthorityContext
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import Members, Payload, members
from mwp.core.group.rejection import invalid
from mwp.core.group.state import WorkItem
from mwp.core.group.work_contract import criterion_ids

Json = dict[str, Any]

REVIEW_MEMBER: Final = "review"
REVIEW_MEMBERS: Final = members(
    criteria=members("criterionId", "evidenceIds", "result", "comments"),
)
RESULTS: Final = frozenset({"passed", "failed", "inconclusive"})
_MAX_COMMENT = 2000

CLAUSES: tuple[str, ...] = ("MWP-WRK-025", "MWP-WRK-026")

Verdict = Literal["accepted", "rejected"]


def review_members() -> dict[str, Members]:
    """The payload member a reviewing kind declares (``members(..., **review_members())``)."""
    return {REVIEW_MEMBER: REVIEW_MEMBERS}


def reviewed(item: WorkItem, cmd: Incoming, ctx: AuthorityContext, verdict: Verdict) -> Json | None:
    """The review record of ``cmd`` on the item's Submission, for its Event's payload; None
    under rules older than ``RULES_LEDGER``."""
    p = cmd.payload
    if ctx.rules < RULES_LEDGER:
        if p.has(REVIEW_MEMBER):
            invalid(
                f"payload.{REVIEW_MEMBER} is not known to this Group's rules",
                member=f"payload.{REVIEW_MEMBER}",
            )
        return None
    submission = item.submission
    assert submission is not None
    review = Payload(p.obj(REVIEW_MEMBER), f"payload.{REVIEW_MEMBER}")
    mapped = _mapped_evidence(submission)
    known = criterion_ids(item.contract)
    entries = review.objects("criteria", min_items=1)
    _check_known(entries, known)
    criteria = [_criterion(entry, mapped) for entry in entries]
    _check_coverage(known, [c["criterionId"] for c in criteria])
    _check_verdict(criteria, verdict)
    order = {c: i for i, c in enumerate(known)}
    return {
        "decision": verdict,
        "reviewer": cmd.actor,
        "reviewedAt": ctx.now,
        "submittedAt": submission["submittedAt"],
        "criteria": sorted(criteria, key=lambda c: order[c["criterionId"]]),
    }


def _mapped_evidence(submission: Json) -> dict[str, set[str]]:
    """Evidence ID -> the criteria the Submission maps it to."""
    return {e["evidenceId"]: set(e["criterionIds"]) for e in submission["evidence"]}


def _check_known(entries: list[Payload], known: list[str]) -> None:
    named = [entry.raw("criterionId") for entry in entries]
    unknown = sorted({str(c)[:128] for c in named if not isinstance(c, str) or c not in known})
    if unknown:
        invalid(
            "the review names criteria the contract does not define",
            member=f"payload.{REVIEW_MEMBER}.criteria[].criterionId",
            unknownCriteria=unknown[:20],
        )


def _criterion(entry: Payload, mapped: dict[str, set[str]]) -> Json:
    criterion = str(entry.raw("criterionId"))
    cited = entry.id_list("evidenceIds", min_items=1)
    foreign = [e for e in cited if e not in mapped]
    if foreign:
        invalid(
            "a review cites only Evidence of the Submission",
            member=f"payload.{REVIEW_MEMBER}.criteria[].evidenceIds",
            criterionId=criterion,
            unknownEvidenceIds=foreign[:20],
        )
    elsewhere = [e for e in cited if criterion not in mapped[e]]
    if elsewhere:
        invalid(
            "the cited Evidence is mapped to other criteria in the Submission",
            member=f"payload.{REVIEW_MEMBER}.criteria[].evidenceIds",
            criterionId=criterion,
            evidenceIds=elsewhere[:20],
        )
    record: Json = {
        "criterionId": criterion,
        "evidenceIds": cited,
        "result": entry.choice("result", RESULTS),
    }
    comments = entry.opt_text("comments", max_length=_MAX_COMMENT)
    if comments is not None:
        record["comments"] = comments
    return record


def _check_coverage(known: list[str], reviewed_ids: list[str]) -> None:
    repeated = sorted({c for c in reviewed_ids if reviewed_ids.count(c) > 1})
    if repeated:
        invalid(
            "each criterion is reviewed once",
            member=f"payload.{REVIEW_MEMBER}.criteria[].criterionId",
            repeatedCriteria=repeated,
        )
    omitted = [c for c in known if c not in reviewed_ids]
    if omitted:
        invalid(
            "the review must give a result for every acceptance criterion",
            member=f"payload.{REVIEW_MEMBER}.criteria",
            unreviewedCriteria=omitted,
        )


def _check_verdict(criteria: list[Json], verdict: Verdict) -> None:
    unmet = [c["criterionId"] for c in criteria if c["result"] != "passed"]
    if verdict == "accepted" and unmet:
        invalid(
            "a result is accepted only when every criterion passed review",
            member=f"payload.{REVIEW_MEMBER}.criteria[].result",
            unmetCriteria=unmet,
        )
    if verdict == "rejected" and not unmet:
        invalid(
            "a rejection names the criteria that did not pass review",
            member=f"payload.{REVIEW_MEMBER}.criteria[].result",
        )
