"""A test harness that drives the pure Group Authority with plain-dict Commands.

Commands carry a dummy but schema-valid signature; the Envelope's hashes are computed the way
the shell computes them. Epochs are filled in from current state unless a test overrides them.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import (
    COORDINATOR_KINDS,
    AuthorityContext,
    Envelope,
    GroupAuthority,
    Outcome,
    TimerFired,
)
from mwp.core.group.api import CURRENT_RULES, RULES_LEDGER
from mwp.core.group.approval import DEFAULT_POLICY_VERSION
from mwp.core.group.clock import plus_seconds
from mwp.core.group.context_package import PUBLISH_KIND as CONTEXT_PACKAGE_PUBLISH
from mwp.core.group.cooperation_limits import CooperationLimits
from mwp.core.group.ids import event_id
from mwp.core.models import validate_document
from mwp.core.trust.registry import KeyValidity, Principal
from mwp.core.trust.signed_document import VerifiedDocument, signing_hash
from mwp.core.wire.jcs import canonicalize, jcs_hash, sha256_ref
from mwp.core.wire.values import parse_timestamp

T0 = "2026-07-15T00:00:00Z"
GROUP = "urn:example:group:alpha"
MISSION = "urn:example:mission:alpha"
OWNER = Principal("human", "urn:example:human:olivia")
COORD = Principal("agent", "urn:example:agent:coordinator")
COORD2 = Principal("agent", "urn:example:agent:coordinator-two")
W1 = Principal("agent", "urn:example:agent:worker-one")
W2 = Principal("agent", "urn:example:agent:worker-two")
W3 = Principal("agent", "urn:example:agent:worker-three")
DELEGATE = Principal("agent", "urn:example:agent:delegate")
SERVICE = Principal("service", "urn:example:service:policy")
AUTHORITY = Principal("service", "urn:example:service:group-authority")
STRANGER = Principal("human", "urn:example:human:stranger")

CAPABILITY = {"id": "acme.software.python", "version": "2.1.0"}
ARTIFACT_A = "sha256:" + "a" * 64
ARTIFACT_B = "sha256:" + "b" * 64
CONTEXT_PACKAGE = "urn:example:context-package:one"
SIGNATURE_VALUE = "c2lnbmF0dXJl"


def contract(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "contractVersion": 1,
        "goal": "Implement cursor-based pagination.",
        "requiredDeliverables": [
            {
                "deliverableId": "patch",
                "description": "The source change.",
                "mediaType": "text/x-diff",
                "schema": "urn:example:schema:opaque",
            }
        ],
        "acceptanceCriteria": [
            {
                "criterionId": "tests-pass",
                "description": "The tests pass.",
                "evidenceRequired": ["deterministic_test"],
            },
            {
                "criterionId": "reviewed",
                "description": "A peer reviewed the change.",
                "evidenceRequired": ["reviewer_assessment"],
            },
        ],
        "inputArtifacts": [],
        "dependencyWorkItemIds": [],
        "allowedResources": [],
        "requiredCapabilities": [CAPABILITY],
        "deadline": "2026-07-20T00:00:00Z",
        "requestedUrgency": "normal",
        "businessImpact": "Unblocks the release.",
        "retryPolicy": {
            "maxAttempts": 3,
            "backoff": "exponential",
            "maxDelay": "PT5M",
            "retryableFailures": ["TRANSIENT"],
        },
        "budget": {"modelTokenLimit": 1000},
        "sideEffectRisk": "none",
        "executionApproval": "not_required",
    }
    base.update(overrides)
    return base


def full_budget(**overrides: Any) -> dict[str, Any]:
    """A budget stating every dimension, as a delegated WorkItem must."""
    base: dict[str, Any] = {
        "currency": "USD",
        "financialLimit": 10,
        "modelTokenLimit": 1000,
        "toolCallLimit": 10,
        "computeSecondsLimit": 60,
        "wallClockSecondsLimit": 600,
        "externalSideEffectLimit": 0,
    }
    base.update(overrides)
    return base


def grant_payload(target: str, **overrides: Any) -> dict[str, Any]:
    """A ``membership.grant_delegation`` payload for DELEGATE over WorkItem ``target``."""
    base: dict[str, Any] = {
        "granteeAgentId": DELEGATE.id,
        "targetWorkItemId": item_id(target),
        "allowedCapabilities": [CAPABILITY],
        "budget": full_budget(financialLimit=30, modelTokenLimit=3000),
        "maxDescendantDepth": 2,
        "expiresAt": "2026-07-16T00:00:00Z",
    }
    base.update(overrides)
    return base


def override_payload(
    beneficiary: Principal, kind: str, action_id: str, policy: str, **overrides: Any
) -> dict[str, Any]:
    """A ``policy.grant_cooperation_override`` payload for one target Command of MISSION,
    expiring an hour after T0; ``None`` for a member removes it."""
    base: dict[str, Any] = {
        "missionId": MISSION,
        "policyName": policy,
        "beneficiary": beneficiary.to_json(),
        "targetKind": kind,
        "targetActionId": action_id,
        "reason": "The release needs one more status update.",
        "expiresAt": "2026-07-15T01:00:00Z",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def selection_basis(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "requiredCapabilities": [CAPABILITY],
        "verifiedMatches": [CAPABILITY],
        "authorizationEligible": True,
        "availabilityEstimate": T0,
        "expectedCost": 1.5,
        "reliabilityEvidence": [],
        "policyRulesApplied": ["capability-match"],
    }
    base.update(overrides)
    return base


def progress() -> dict[str, Any]:
    return {
        "currentPhase": "implementation",
        "completedMilestones": ["design"],
        "nextCheckpoint": "tests",
        "blockers": [],
        "updatedCompletionEstimate": "2026-07-16T00:00:00Z",
        "evidenceIds": [],
    }


def evidence() -> list[dict[str, Any]]:
    return [
        {"evidenceId": "urn:example:evidence:tests", "criterionIds": ["tests-pass"]},
        {"evidenceId": "urn:example:evidence:review", "criterionIds": ["reviewed"]},
    ]


def item_id(name: str) -> str:
    return f"urn:example:work-item:{name}"


def content_hash(name: str) -> str:
    """A distinct ``sha256:`` content hash per name."""
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()


ORGANIZATION = "urn:example:organization:acme"
KEYS_VALID_FROM = "2020-01-01T00:00:00Z"


def verified(command: dict[str, Any]) -> VerifiedDocument | None:
    """What the shell's six stages would establish for ``command`` (its signer's key valid from
    2020 on, for First Admission); None for a Command they could not have passed."""
    try:
        unsigned = {k: v for k, v in command.items() if k != "signature"}
        signing_bytes = canonicalize(unsigned)
        actor = command["actor"]
        return VerifiedDocument(
            profile_id="command",
            document=command,
            organization_id=ORGANIZATION,
            signing_bytes=signing_bytes,
            signing_hash=sha256_ref(signing_bytes),
            key_id=command["signature"]["keyId"],
            principal=Principal(actor["type"], actor["id"]),
            protected_time=command["issuedAt"],
            key_validity=KeyValidity(parse_timestamp(KEYS_VALID_FROM), None, None),
            signature=b"",
        )
    except (KeyError, TypeError, ValueError):
        return None


def assert_valid_event(event: dict[str, Any]) -> None:
    signature = {
        "algorithm": "Ed25519",
        "keyId": "urn:example:key:authority",
        "createdAt": event["occurredAt"],
        "value": SIGNATURE_VALUE,
    }
    validate_document("event.schema.json", {**event, "signature": signature})


class Harness:
    """One Group Authority, a clock, Session Epochs and Command builders."""

    def __init__(self, authority: GroupAuthority | None = None, group_id: str = GROUP) -> None:
        self.authority = authority or GroupAuthority()
        self.group_id = group_id
        self.now = T0
        self.sessions: dict[str, int] = {p.id: 1 for p in (COORD, COORD2, W1, W2, W3, DELEGATE)}
        self.at_capacity = False  # the shell's "no room for more WorkItems"
        self.approved_missions: dict[str, str] = {}
        self.rules = CURRENT_RULES  # the rules revision every decision is made under
        self.cooperation_limits = CooperationLimits()  # Organization policy (runaway.py)
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    # --- clock and context -----------------------------------------------------------------

    def advance(self, seconds: int) -> str:
        self.now = plus_seconds(self.now, seconds)
        return self.now

    def ctx(self) -> AuthorityContext:
        return AuthorityContext(
            now=self.now,
            authority=AUTHORITY,
            session_epochs=dict(self.sessions),
            approved_missions=dict(self.approved_missions),
            at_capacity=self.at_capacity,
            rules=self.rules,
            cooperation_limits=self.cooperation_limits,
        )

    # --- Commands ----------------------------------------------------------------------------

    def membership_epoch(self, principal_id: str) -> int | None:
        for m in self.authority.mission_view().get("memberships", []):
            if m["member"]["id"] == principal_id:
                return int(m["membershipEpoch"])
        return None

    def coordinator_epoch(self) -> int | None:
        view = self.authority.mission_view()
        return int(view["coordinator"]["coordinatorEpoch"]) if view else None

    def command(
        self, actor: Principal, kind: str, payload: dict[str, Any] | None = None, **envelope: Any
    ) -> dict[str, Any]:
        """A Command dict; ``None`` for an envelope member removes it."""
        command: dict[str, Any] = {
            "protocolVersion": "0.1",
            "actionId": f"urn:uuid:00000000-0000-4000-8000-{next(self._ids):012d}",
            "actor": actor.to_json(),
            "groupId": self.group_id,
            "kind": kind,
            "correlationId": "urn:example:correlation:one",
            "issuedAt": self.now,
            "payload": payload or {},
        }
        if actor.type == "agent":
            command["sessionEpoch"] = self.sessions.get(actor.id, 1)
        if actor.type != "service" and kind not in ("mission.create", "mission.create_follow_up"):
            epoch = self.membership_epoch(actor.id)
            if epoch is not None:
                command["membershipEpoch"] = epoch
        if actor.type == "agent" and kind in COORDINATOR_KINDS:
            view = self.authority.mission_view()
            if view and view["coordinator"]["agentId"] == actor.id:
                command["coordinatorEpoch"] = view["coordinator"]["coordinatorEpoch"]
        for name, value in envelope.items():
            if value is None:
                command.pop(name, None)
            else:
                command[name] = value
        command["signature"] = {
            "algorithm": "Ed25519",
            "keyId": "urn:example:key:" + actor.id.rsplit(":", 1)[-1],
            "createdAt": command["issuedAt"],
            "value": SIGNATURE_VALUE,
        }
        return command

    @staticmethod
    def envelope(command: dict[str, Any]) -> Envelope:
        return Envelope(command, signing_hash(command), jcs_hash(command), verified(command))

    def send(self, command: dict[str, Any]) -> Outcome:
        outcome = self.authority.submit(self.envelope(command), self.ctx())
        for event in outcome.events:
            assert_valid_event(event)
        self.events.extend(outcome.events)
        return outcome

    def submit(
        self, actor: Principal, kind: str, payload: dict[str, Any] | None = None, **envelope: Any
    ) -> Outcome:
        return self.send(self.command(actor, kind, payload, **envelope))

    def refuse(self, command: dict[str, Any], code: ErrorCode) -> MwpError:
        """Assert the Command is refused with ``code`` by check() and submit() alike, with the
        Action ID set, and that nothing changed."""
        before = _fingerprint(self.authority)
        envelope = self.envelope(command)
        with pytest.raises(MwpError) as checked:
            self.authority.check(envelope, self.ctx())
        with pytest.raises(MwpError) as submitted:
            self.authority.submit(envelope, self.ctx())
        assert checked.value.code == code, checked.value
        assert submitted.value.code == code, submitted.value
        assert submitted.value.action_id == command.get("actionId")
        assert _fingerprint(self.authority) == before
        return submitted.value

    def reject(
        self,
        code: ErrorCode,
        actor: Principal,
        kind: str,
        payload: dict[str, Any] | None = None,
        **envelope: Any,
    ) -> MwpError:
        return self.refuse(self.command(actor, kind, payload, **envelope), code)

    def fire(self, work_item_id: str, kind: Any, token: str) -> Outcome | None:
        outcome = self.authority.fire(TimerFired(work_item_id, kind, token), self.ctx())
        if outcome is not None:
            for event in outcome.events:
                assert_valid_event(event)
            self.events.extend(outcome.events)
        return outcome

    def revoke_replaced_sessions(self) -> Outcome | None:
        outcome = self.authority.revoke_replaced_sessions(self.ctx())
        if outcome is not None:
            for event in outcome.events:
                assert_valid_event(event)
            self.events.extend(outcome.events)
        return outcome

    # --- scenario steps ------------------------------------------------------------------------

    def create_mission(self, **payload: Any) -> Outcome:
        body: dict[str, Any] = {
            "missionId": MISSION,
            "objective": "Ship pagination.",
            "definitionOfDone": [
                {
                    "criterionId": "released",
                    "description": "Pagination is released.",
                    "evidenceRequired": ["deterministic_test"],
                }
            ],
            "budget": {"currency": "USD", "financialLimit": 100, "modelTokenLimit": 100_000},
            "deadline": "2026-08-01T00:00:00Z",
            "coordinatorAgentId": COORD.id,
        }
        body.update(payload)
        return self.submit(OWNER, "mission.create", body)

    def admit(self, worker: Principal, role: str = "worker") -> Outcome:
        return self.submit(COORD, "membership.change", {"memberId": worker.id, "role": role})

    def authorize(self, name: str, **contract_overrides: Any) -> Outcome:
        return self.submit(
            COORD,
            "work.authorize",
            {"contract": contract(**contract_overrides)},
            workItemId=item_id(name),
        )

    def context_package(
        self, package_id: str = CONTEXT_PACKAGE, generator: Principal = COORD, **overrides: Any
    ) -> dict[str, Any]:
        """A schema-valid Context Package of this Group citing its first Event (dummy
        signature: the shell, not the core, verifies it); ``None`` for a member removes it."""
        package: dict[str, Any] = {
            "contextPackageId": package_id,
            "version": 1,
            "missionId": self.authority.mission_id,
            "groupId": self.group_id,
            "sourceEventRange": {
                "fromSequence": 1,
                "toSequence": 1,
                "eventIds": [event_id(self.group_id, 1)],
            },
            "artifactHashes": [],
            "summary": "Ship pagination: the Work Contracts are in the cited Events.",
            "decisions": [],
            "constraints": [],
            "unresolvedQuestions": [],
            "generatedBy": generator.to_json(),
            "generatedAt": self.now,
        }
        for member, value in overrides.items():
            if value is None:
                package.pop(member, None)
            else:
                package[member] = value
        package["signature"] = {
            "algorithm": "Ed25519",
            "keyId": "urn:example:key:" + generator.id.rsplit(":", 1)[-1],
            "createdAt": package.get("generatedAt", self.now),
            "value": SIGNATURE_VALUE,
        }
        return package

    def publish_context_package(
        self, package: dict[str, Any] | None = None, actor: Principal = COORD
    ) -> Outcome:
        return self.submit(
            actor, CONTEXT_PACKAGE_PUBLISH, {"contextPackage": package or self.context_package()}
        )

    def packages(self) -> set[str]:
        return set(self.authority._state.context_packages)

    def handover_package(self) -> str:
        """The Mission-wide CONTEXT_PACKAGE a replacement Coordinator is handed (from
        ``RULES_LEDGER`` on it needs one), published first if the Group has none yet."""
        if CONTEXT_PACKAGE not in self.packages():
            self.publish_context_package()
        return CONTEXT_PACKAGE

    def offer(self, name: str, *workers: Principal, expires_in: int = 600, **extra: Any) -> Outcome:
        """``work.offer``; when a candidate is new to the Group it names CONTEXT_PACKAGE,
        published first (Mission-wide) if the Group has no such package yet."""
        new_worker = any(
            m is None or m.state == "ended"
            for m in (self.authority._state.memberships.get(w.id) for w in workers or (W1,))
        )
        payload: dict[str, Any] = {
            "candidates": [
                {"agentId": w.id, "selectionBasis": selection_basis()} for w in workers or (W1,)
            ],
            "expiresAt": plus_seconds(self.now, expires_in),
        }
        if new_worker and "contextPackage" not in extra:
            payload["contextPackageId"] = CONTEXT_PACKAGE
            if (
                extra.get("contextPackageId", CONTEXT_PACKAGE) == CONTEXT_PACKAGE
                and CONTEXT_PACKAGE not in self.packages()
            ):
                self.publish_context_package()
        payload.update(extra)
        payload = {k: v for k, v in payload.items() if v is not None}
        return self.submit(COORD, "work.offer", payload, workItemId=item_id(name))

    def view(self, name: str) -> dict[str, Any]:
        return self.authority.work_item_view(item_id(name))

    def offer_id(self, name: str, worker: Principal) -> str:
        offers = self.view(name).get("offers", [])
        return next(o["offerId"] for o in offers if o["agentId"] == worker.id)

    def accept(self, name: str, worker: Principal = W1) -> Outcome:
        return self.submit(
            worker, "work.accept_offer", self.accept_payload(name, worker), workItemId=item_id(name)
        )

    def accept_payload(self, name: str, worker: Principal = W1) -> dict[str, Any]:
        return {
            "offerId": self.offer_id(name, worker),
            "contractVersion": self.view(name)["contract"]["contractVersion"],
        }

    def epoch(self, name: str) -> int:
        return int(self.view(name)["ownershipEpoch"])

    def lease_id(self, name: str) -> str:
        return str(self.view(name)["executionLease"]["leaseId"])

    def owner_payload(self, name: str, *, lease: bool = True, **extra: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {"ownershipEpoch": self.epoch(name)}
        if lease:
            payload["leaseId"] = self.lease_id(name)
        payload.update(extra)
        return payload

    def start(self, name: str, worker: Principal = W1, **extra: Any) -> Outcome:
        return self.submit(
            worker,
            "work.start",
            {"ownershipEpoch": self.epoch(name), **extra},
            workItemId=item_id(name),
        )

    def manifest(
        self,
        name: str,
        worker: Principal = W1,
        content: str = ARTIFACT_A,
        sources: tuple[str, ...] = (),
        **overrides: Any,
    ) -> dict[str, Any]:
        """A schema-valid Artifact manifest of ``content`` produced by ``worker`` for WorkItem
        ``name`` (dummy signature: the shell, not the core, verifies it)."""
        digits = content.removeprefix("sha256:")
        manifest: dict[str, Any] = {
            "artifactId": f"urn:example:artifact:{digits[:16]}",
            "contentHash": content,
            "uri": f"https://artifacts.example/sha256/{digits}",
            "sizeBytes": 4096,
            "mediaType": "text/x-diff",
            "schemaUri": "urn:example:schema:opaque",
            "producer": {
                "agentId": worker.id,
                "agentCardVersion": 1,
                "capabilities": [CAPABILITY],
            },
            "missionId": self.authority.mission_id,
            "groupId": self.group_id,
            "workItemId": item_id(name),
            "sourceArtifactHashes": list(sources),
            "toolVersions": [{"name": "git", "version": "2.50.0"}],
            "modelVersions": [],
            "classification": "internal",
            "createdAt": self.now,
        }
        manifest.update(overrides)
        manifest["signature"] = {
            "algorithm": "Ed25519",
            "keyId": "urn:example:key:" + worker.id.rsplit(":", 1)[-1],
            "createdAt": manifest["createdAt"],
            "value": SIGNATURE_VALUE,
        }
        return manifest

    def publish_payload(
        self,
        name: str,
        worker: Principal = W1,
        content: str = ARTIFACT_A,
        sources: tuple[str, ...] = (),
        external: tuple[str, ...] = (),
        **overrides: Any,
    ) -> dict[str, Any]:
        payload = self.owner_payload(
            name, manifest=self.manifest(name, worker, content, sources, **overrides)
        )
        if external:
            payload["externalSourceHashes"] = list(external)
        return payload

    def publish(
        self,
        name: str,
        worker: Principal = W1,
        content: str = ARTIFACT_A,
        sources: tuple[str, ...] = (),
        external: tuple[str, ...] = (),
        **overrides: Any,
    ) -> Outcome:
        """``artifact.publish`` of ``content`` by the owner of the active WorkItem ``name``."""
        return self.submit(
            worker,
            "artifact.publish",
            self.publish_payload(name, worker, content, sources, external, **overrides),
            workItemId=item_id(name),
        )

    def published(self) -> set[str]:
        return {a["contentHash"] for a in self.authority.mission_view().get("artifacts", [])}

    def submit_work(self, name: str, worker: Principal = W1) -> Outcome:
        """Publish ARTIFACT_A (unless the Group has it) and submit it with full Evidence."""
        if ARTIFACT_A not in self.published():
            self.publish(name, worker)
        return self.submit(
            worker,
            "work.submit",
            self.owner_payload(name, artifactHashes=[ARTIFACT_A], evidence=evidence()),
            workItemId=item_id(name),
        )

    def review(self, name: str, results: dict[str, str] | None = None) -> dict[str, Any]:
        """A review record citing, per acceptance criterion, the Submission's Evidence mapped
        to it; each criterion ``passed`` unless ``results`` gives it another result."""
        view = self.view(name)
        criteria = []
        for criterion in view["contract"]["acceptanceCriteria"]:
            cid = criterion["criterionId"]
            cited = [
                e["evidenceId"]
                for e in view.get("submissionEvidence", [])
                if cid in e["criterionIds"]
            ]
            result = (results or {}).get(cid, "passed")
            criteria.append({"criterionId": cid, "evidenceIds": cited, "result": result})
        return {"criteria": criteria}

    def review_payload(self, name: str) -> dict[str, Any]:
        """What ``work.accept_result`` needs under the rules in force."""
        return {"review": self.review(name)} if self.rules >= RULES_LEDGER else {}

    def accept_result(self, name: str, actor: Principal = COORD) -> Outcome:
        return self.submit(
            actor, "work.accept_result", self.review_payload(name), workItemId=item_id(name)
        )

    def approval(self, approver: Principal = OWNER, **overrides: Any) -> dict[str, Any]:
        """A schema-valid Approval of the submitted revision and Artifact set by ``approver``
        (dummy signature: the shell, not the core, verifies it); ``None`` removes a member."""
        view = self.authority.mission_view()
        # Outside awaiting_approval: the Mission's revision and the harness's Artifact.
        submission = view["submission"] or {
            "missionRevision": view["revision"],
            "artifactHashes": [ARTIFACT_A],
        }
        doc: dict[str, Any] = {
            "approvalId": f"urn:example:approval:{next(self._ids)}",
            "kind": "child_mission" if "parent" in view else "mission_final",
            "decision": "approved",
            "missionId": view["missionId"],
            "groupId": self.group_id,
            "missionRevision": submission["missionRevision"],
            "artifactHashes": list(submission["artifactHashes"]),
            "acceptancePolicyVersion": view["approvalPolicy"].get(
                "policyVersion", DEFAULT_POLICY_VERSION
            ),
            "approver": approver.to_json(),
            "comments": "Approved.",
            "conditions": [],
            "occurredAt": self.now,
        }
        for member, value in overrides.items():
            if value is None:
                doc.pop(member, None)
            else:
                doc[member] = value
        doc["signature"] = {
            "algorithm": "Ed25519",
            "keyId": "urn:example:key:" + approver.id.rsplit(":", 1)[-1],
            "createdAt": doc.get("occurredAt", self.now),
            "value": SIGNATURE_VALUE,
        }
        return doc

    def approve_payload(self, approver: Principal = OWNER) -> dict[str, Any]:
        """``mission.approve`` of the submitted revision and Artifact set, with the signed
        Approval the rules in force need."""
        view = self.authority.mission_view()
        submission = view["submission"] or {
            "missionRevision": view["revision"],
            "artifactHashes": [ARTIFACT_A],
        }
        payload: dict[str, Any] = {
            "missionRevision": submission["missionRevision"],
            "artifactHashes": list(submission["artifactHashes"]),
        }
        if self.rules >= RULES_LEDGER:
            payload["approval"] = self.approval(approver)
        return payload

    def changes_payload(self, reason: str = "More.", approver: Principal = OWNER) -> dict[str, Any]:
        """``mission.request_changes`` of the submitted revision under the rules in force: the
        signed decision ``changes_requested`` with ``reason`` in it, or (older rules) bare."""
        view = self.authority.mission_view()
        revision = view["submission"]["missionRevision"] if view["submission"] else view["revision"]
        if self.rules < RULES_LEDGER:
            return {"missionRevision": revision, "reason": reason}
        approval = self.approval(approver, decision="changes_requested", comments=reason)
        return {"missionRevision": revision, "approval": approval}

    def approve(self, approver: Principal = OWNER) -> Outcome:
        return self.submit(approver, "mission.approve", self.approve_payload(approver))

    def verify(self, name: str, worker: Principal = W1, **contract_overrides: Any) -> None:
        """authorize -> offer -> accept -> start -> submit -> accept_result."""
        self.authorize(name, **contract_overrides)
        self.offer(name, worker)
        self.accept(name, worker)
        self.start(name, worker)
        self.submit_work(name, worker)
        self.accept_result(name)

    def drive(self, name: str, target: str, *, gated: bool = False) -> None:
        """Bring a new WorkItem ``name`` (owner W1) into ``target`` state."""
        overrides = {"executionApproval": "policy_required"} if gated else {}
        self.authorize(name, **overrides)
        if target == "open":
            return
        if target == "cancelled":
            self.submit(COORD, "work.cancel", {}, workItemId=item_id(name))
            return
        if target == "failed":
            self.submit(
                COORD,
                "work.fail",
                {"reason": "no longer needed", "failureEvidenceIds": ["urn:example:evidence:f"]},
                workItemId=item_id(name),
            )
            return
        self.offer(name, W1)
        if target == "offered":
            return
        self.accept(name, W1)
        if gated:
            self.submit(
                OWNER,
                "approval.grant_execution",
                {"contractVersion": 1},
                workItemId=item_id(name),
            )
        if target == "queued":
            return
        self.start(name, W1)
        if target == "active":
            return
        if target == "blocked":
            self.submit(
                W1,
                "work.block",
                self.owner_payload(name, requiredResolution="Need database credentials."),
                workItemId=item_id(name),
            )
            return
        self.submit_work(name, W1)
        if target == "submitted":
            return
        self.accept_result(name)
        assert target == "verified"


def _fingerprint(authority: GroupAuthority) -> str:
    import json

    return json.dumps(authority.snapshot(), sort_keys=True)


def fingerprint(authority: GroupAuthority) -> str:
    return _fingerprint(authority)


def mission_harness() -> Harness:
    """A Group with its Mission created and W1, W2 admitted as workers."""
    h = Harness()
    h.create_mission()
    h.admit(W1)
    h.admit(W2)
    return h
