"""Organization services, pure part: the Agent Registry and Session Epochs of one Organization.

:class:`OrganizationRegistry` is the authoritative state the ``OrganizationRegistryWorkflow``
(``workflows/organization.py``) holds, and the decisions it takes. No I/O, no Temporal
imports, deterministic: the workflow supplies the clock and the Event IDs.

What it is authoritative for
----------------------------

* **Signing-key bindings** of agents, humans and services with their validity history, kept
  as complete Organization-scoped Registry evidence (``RegistryEvidence``). Every change is
  validated by rebuilding the whole evidence with ``RegistryEvidence.from_json``, so key-ID
  reuse, public-key aliases, weak keys and a validity boundary moved later are refused before
  anything changes. History is append-only: ``validUntil``/``revokedAt`` are only ever added
  or moved earlier, by appending a validity-status record.
* **Agent Cards**, signed by the Organization's registry service; registering a card also
  registers the card's public keys as that agent's bindings (a repeated identical declaration
  is the same logical binding).
* **Session Epochs** per agent: opening a session issues ``previous + 1``, which fences every
  older session of that agent.
* **revision**, incremented on every accepted change (never on a duplicate or a no-op).

Registry Commands
-----------------

Every change is a signed Command by an Organization service, verified in the six stages
against the registry's own current evidence, then checked for freshness, authorization,
``(actor, actionId)`` idempotency (a byte-equal retry returns the original result; other
content under the same Action ID gets ``ACTION_ID_COLLISION``) and ``expectedRevision``:

===========================  ===========================================  ===================
kind                         payload                                      who may sign
===========================  ===========================================  ===================
``KEY_BINDING_REGISTER``     ``{"binding": {keyId, principal, algorithm,   registry service
                             publicKey, validFrom}}``
``KEY_VALIDITY_CHANGE``      ``{"keyId", "validUntil"?, "revokedAt"?}``   registry service
``AGENT_CARD_REGISTER``      ``{"agentCard": <signed Agent Card>}``       registry service
``SESSION_OPEN``             ``{"agentId"}``                              registry service or
                                                                          a session authority
===========================  ===========================================  ===================

The first two kinds are this product's extension; MWP 0.1 defines the last two. The registry
service's own first binding comes from the workflow's start input: whoever may start that
workflow is the Organization's trust root (the trusted deployment seam of spec 6.4).

Subscription protocol (for Group Authorities)
---------------------------------------------

A MissionWorkflow needs current Registry evidence (stage 4) and Session Epochs (fencing).
It subscribes by signalling the registry workflow (ID :func:`organization_workflow_id`)
``SIGNAL_SUBSCRIBE`` with its own workflow ID. The registry then signals it
``SIGNAL_REGISTRY_CHANGED`` with a :class:`RegistryNotice` (JSON) right away, and again after
every change, coalescing bursts into one notice of the newest revision. Delivery is
at-least-once and may reorder: a subscriber keeps the notice with the highest ``revision``
and ignores older ones (:class:`RegistrySubscription` does exactly that). Subscriptions
survive continue-as-new on both sides (a signal addresses the workflow ID, not a run); a
subscriber that no longer exists is dropped. ``SIGNAL_UNSUBSCRIBE`` ends a subscription.

A notice is authoritative as of its revision only: between a change and its notice a Group
Authority still decides on the previous revision, which is the bounded staleness the
signed ``revision`` makes visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import RegistryEvidence, RegistryEvidenceError
from mwp.core.trust.signed_document import (
    PROFILES,
    FreshnessWindow,
    VerifiedDocument,
    check_command_freshness,
    verify,
    verify_value,
)
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import parse_timestamp

# --- Command and Event kinds ----------------------------------------------------------------

AGENT_CARD_REGISTER = "ext.missionweaveprotocol.registry.agent_card_register"
SESSION_OPEN = "ext.missionweaveprotocol.identity.session_open"
# This product's extension kinds: bindings without an Agent Card (humans, services) and
# validity changes.
KEY_BINDING_REGISTER = "ext.missionweave-temporal.registry.key_binding_register"
KEY_VALIDITY_CHANGE = "ext.missionweave-temporal.registry.key_validity_change"
REGISTRY_COMMAND_KINDS = frozenset(
    {AGENT_CARD_REGISTER, SESSION_OPEN, KEY_BINDING_REGISTER, KEY_VALIDITY_CHANGE}
)

AGENT_CARD_REGISTERED = "ext.missionweaveprotocol.registry.agent_card_registered"
SESSION_OPENED = "ext.missionweaveprotocol.identity.session_opened"

_COMMAND_SCOPE_MEMBERS = ("groupId", "sessionEpoch", "membershipEpoch", "coordinatorEpoch")
_BINDING_REQUEST_MEMBERS = {"keyId", "principal", "algorithm", "publicKey", "validFrom"}
DEFAULT_FRESHNESS = FreshnessWindow()


# --- notices for subscribers ----------------------------------------------------------------


@dataclass(frozen=True)
class RegistryNotice:
    """What a subscribed Group Authority receives: one coherent registry revision."""

    organization_id: str
    revision: int
    evidence: dict[str, Any]  # RegistryEvidence JSON, complete for stage 4
    session_epochs: dict[str, int]
    # Approved root Missions: Mission ID -> its human MissionOwner's ID (for follow-ups).
    approved_missions: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "organizationId": self.organization_id,
            "revision": self.revision,
            "evidence": self.evidence,
            "sessionEpochs": dict(self.session_epochs),
            "approvedMissions": dict(self.approved_missions),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RegistryNotice:
        return cls(
            value["organizationId"],
            int(value["revision"]),
            dict(value["evidence"]),
            {str(k): int(v) for k, v in value["sessionEpochs"].items()},
            {str(k): str(v) for k, v in value.get("approvedMissions", {}).items()},
        )


class RegistrySubscription:
    """A subscriber's view: the newest notice, its evidence parsed once."""

    def __init__(self, organization_id: str) -> None:
        self.organization_id = organization_id
        self.notice: RegistryNotice | None = None
        self._evidence: RegistryEvidence | None = None

    def offer(self, value: Mapping[str, Any]) -> bool:
        """Keep ``value`` if it is newer than the notice held; True if it was kept."""
        notice = RegistryNotice.from_json(value)
        if notice.organization_id != self.organization_id:
            return False
        if self.notice is not None and notice.revision <= self.notice.revision:
            return False
        self.notice, self._evidence = notice, None
        return True

    @property
    def revision(self) -> int:
        return 0 if self.notice is None else self.notice.revision

    @property
    def evidence(self) -> RegistryEvidence | None:
        """None until the first notice arrives (verification must then fail closed)."""
        if self._evidence is None and self.notice is not None:
            self._evidence = RegistryEvidence.from_json(self.notice.evidence)
        return self._evidence

    def session_epoch(self, agent_id: str) -> int | None:
        return None if self.notice is None else self.notice.session_epochs.get(agent_id)

    def check_session(self, agent_id: str, session_epoch: int) -> None:
        """Refuse an agent's Command from any session but its current one.

        An epoch newer than the notice held fails closed too: this Authority has not yet
        learned of that session.
        """
        if session_epoch != self.session_epoch(agent_id):
            raise MwpError(ErrorCode.AUTH_STALE_SESSION)


# --- the registry ---------------------------------------------------------------------------


def _invalid(reason: str, action_id: str | None = None) -> MwpError:
    return MwpError(
        ErrorCode.INVALID_COMMAND,
        f"The registry refused the Command: {reason}.",
        action_id=action_id,
        details={"reason": reason},
    )


@dataclass(frozen=True)
class RecentAction:
    """An accepted registry Command, kept for idempotency while it could still be fresh."""

    signing_hash: str
    issued_at: str
    result: dict[str, Any]


@dataclass(frozen=True)
class RegistryDecision:
    """What one Command would change; :meth:`OrganizationRegistry.apply` commits it."""

    kind: str
    verified: VerifiedDocument
    command_hash: str
    duplicate_of: RecentAction | None = None
    evidence: RegistryEvidence | None = None  # the new evidence, if bindings change
    agent_card: dict[str, Any] | None = None
    session_agent_id: str | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def action_key(self) -> tuple[str, str]:
        document = self.verified.document
        return (document["actor"]["id"], document["actionId"])

    @property
    def changes_state(self) -> bool:
        return self.duplicate_of is None and (
            self.evidence is not None
            or self.agent_card is not None
            or self.session_agent_id is not None
        )


class OrganizationRegistry:
    """The authoritative Agent Registry and session service of one Organization."""

    def __init__(
        self,
        organization_id: str,
        registry_service_id: str,
        evidence: RegistryEvidence,
        *,
        session_authorities: Sequence[str] = (),
        agent_cards: Mapping[str, dict[str, Any]] | None = None,
        session_epochs: Mapping[str, int] | None = None,
        revision: int = 1,
        recent_actions: Mapping[tuple[str, str], RecentAction] | None = None,
        freshness: FreshnessWindow = DEFAULT_FRESHNESS,
        approved_missions: Mapping[str, str] | None = None,
    ) -> None:
        self.organization_id = organization_id
        self.registry_service_id = registry_service_id
        self.session_authorities = frozenset(session_authorities) | {registry_service_id}
        self.evidence = evidence
        self.agent_cards: dict[str, dict[str, Any]] = dict(agent_cards or {})
        self.session_epochs: dict[str, int] = dict(session_epochs or {})
        self.revision = revision
        self.recent_actions: dict[tuple[str, str], RecentAction] = dict(recent_actions or {})
        self.freshness = freshness
        self.approved_missions: dict[str, str] = dict(approved_missions or {})

    @classmethod
    def bootstrap(
        cls,
        organization_id: str,
        registry_service_binding: Mapping[str, Any],
        *,
        session_authorities: Sequence[str] = (),
    ) -> OrganizationRegistry:
        """A new registry whose only binding is its own service key (the trust root)."""
        binding = dict(registry_service_binding)
        if set(binding) != _BINDING_REQUEST_MEMBERS:
            raise _invalid("binding-shape")
        try:
            evidence = RegistryEvidence.from_json(
                {
                    "organizationId": organization_id,
                    "bindings": [{**binding, "validityHistory": []}],
                }
            )
        except RegistryEvidenceError as exc:
            raise _invalid(exc.reason) from None
        (only,) = evidence.bindings.values()
        if only.principal.type != "service":
            raise _invalid("registry-service-principal")
        return cls(
            organization_id, only.principal.id, evidence, session_authorities=session_authorities
        )

    # --- views ------------------------------------------------------------------------------

    def evidence_json(self) -> dict[str, Any]:
        return self.evidence.to_json()

    def notice(self) -> RegistryNotice:
        return RegistryNotice(
            self.organization_id,
            self.revision,
            self.evidence_json(),
            dict(self.session_epochs),
            dict(self.approved_missions),
        )

    def record_approved_mission(self, mission_id: str, owner_id: str) -> bool:
        """A Group Authority reports its root Mission approved; True if that is news (a new
        revision goes out to the subscribers, so a follow-up can link to it anywhere)."""
        if self.approved_missions.get(mission_id) == owner_id:
            return False
        self.approved_missions[mission_id] = owner_id
        self.revision += 1
        return True

    # --- decisions --------------------------------------------------------------------------

    def check(self, kind: str, wire: bytes, now: str) -> RegistryDecision:
        """Decide a Command without changing anything; raises a typed :class:`MwpError`."""
        verified = verify(wire, "command", self.evidence)
        check_command_freshness(verified, now, self.freshness)
        command = verified.document
        action_id: str = command["actionId"]
        if command["kind"] != kind:
            raise _invalid("kind-not-for-this-update", action_id)
        for member in _COMMAND_SCOPE_MEMBERS:
            if member in command:
                raise _invalid(f"{member}-not-allowed", action_id)
        for name, extension in (command.get("extensions") or {}).items():
            if extension.get("critical"):
                raise MwpError(
                    ErrorCode.UNKNOWN_CRITICAL_EXTENSION,
                    action_id=action_id,
                    details={"extension": name},
                )
        self._authorize(kind, verified, action_id)
        command_hash = sha256_ref(canonicalize(command))
        recent = self.recent_actions.get((verified.principal.id, action_id))
        if recent is not None:
            if recent.signing_hash != verified.signing_hash:
                raise MwpError(ErrorCode.ACTION_ID_COLLISION, action_id=action_id)
            return RegistryDecision(kind, verified, command_hash, duplicate_of=recent)
        expected = command.get("expectedRevision")
        if expected is not None and expected != self.revision:
            raise MwpError(
                ErrorCode.REVISION_CONFLICT,
                action_id=action_id,
                expected_revision=expected,
                current_revision=self.revision,
            )
        payload: dict[str, Any] = command["payload"]
        if kind == KEY_BINDING_REGISTER:
            return self._decide_binding(verified, command_hash, payload)
        if kind == KEY_VALIDITY_CHANGE:
            return self._decide_validity(verified, command_hash, payload, now)
        if kind == AGENT_CARD_REGISTER:
            return self._decide_agent_card(verified, command_hash, payload, now)
        if kind == SESSION_OPEN:
            return self._decide_session(verified, command_hash, payload, now)
        raise _invalid("unknown-registry-command", action_id)

    def apply(self, decision: RegistryDecision, *, now: str, event_id: str) -> dict[str, Any]:
        """Commit a decision taken by :meth:`check` on this same state; return its result.

        ``event_id`` names the Organization Event the change produces (if its kind has one).
        """
        if decision.duplicate_of is not None:
            return {**decision.duplicate_of.result, "duplicate": True}
        command = decision.verified.document
        result: dict[str, Any] = {
            "kind": decision.kind,
            "actionId": command["actionId"],
            **decision.result,
        }
        if decision.changes_state:
            self.revision += 1
            if decision.evidence is not None:
                self.evidence = decision.evidence
            if decision.agent_card is not None:
                self.agent_cards[decision.agent_card["agentId"]] = decision.agent_card
            if decision.session_agent_id is not None:
                epoch = self.session_epochs.get(decision.session_agent_id, 0) + 1
                self.session_epochs[decision.session_agent_id] = epoch
                result["sessionEpoch"] = epoch
            event = self._event(decision, result, now=now, event_id=event_id)
            if event is not None:
                result["event"] = event
        result["revision"] = self.revision
        result["duplicate"] = False
        self._forget_stale_actions(now)
        self.recent_actions[decision.action_key] = RecentAction(
            decision.verified.signing_hash, decision.verified.protected_time, result
        )
        return result

    def _authorize(self, kind: str, verified: VerifiedDocument, action_id: str) -> None:
        actor = verified.principal
        allowed = self.session_authorities if kind == SESSION_OPEN else {self.registry_service_id}
        if actor.type != "service" or actor.id not in allowed:
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                action_id=action_id,
                diagnostic=Diagnostic("authorization", "not-a-registry-authority"),
            )

    def _with_bindings(self, extra: Sequence[dict[str, Any]], action_id: str) -> RegistryEvidence:
        """The whole evidence plus ``extra`` declarations, validated as one.

        A declaration of an existing key ID merges with it when the binding is identical (its
        history records are appended), and is key-ID reuse otherwise.
        """
        current = self.evidence_json()["bindings"]
        try:
            return RegistryEvidence.from_json(
                {"organizationId": self.organization_id, "bindings": [*current, *extra]}
            )
        except RegistryEvidenceError as exc:
            raise _invalid(exc.reason, action_id) from None

    def _next_status_sequence(self, key_id: str) -> int:
        binding = self.evidence.bindings.get(key_id)
        return binding.history[-1].sequence + 1 if binding and binding.history else 1

    def _decide_binding(
        self, verified: VerifiedDocument, command_hash: str, payload: dict[str, Any]
    ) -> RegistryDecision:
        action_id = verified.document["actionId"]
        binding = payload.get("binding")
        if set(payload) != {"binding"} or not isinstance(binding, dict):
            raise _invalid("payload-shape", action_id)
        if set(binding) != _BINDING_REQUEST_MEMBERS:
            raise _invalid("binding-shape", action_id)
        evidence = self._with_bindings([{**binding, "validityHistory": []}], action_id)
        key_id = binding["keyId"]
        result = {"keyId": key_id, "principal": binding["principal"]}
        if key_id in self.evidence.bindings:  # the identical binding, declared again
            return RegistryDecision(KEY_BINDING_REGISTER, verified, command_hash, result=result)
        return RegistryDecision(
            KEY_BINDING_REGISTER, verified, command_hash, evidence=evidence, result=result
        )

    def _decide_validity(
        self, verified: VerifiedDocument, command_hash: str, payload: dict[str, Any], now: str
    ) -> RegistryDecision:
        action_id = verified.document["actionId"]
        boundaries = {k: v for k, v in payload.items() if k in ("validUntil", "revokedAt")}
        if (
            not isinstance(payload.get("keyId"), str)
            or set(payload) != {"keyId", *boundaries}
            or not boundaries
        ):
            raise _invalid("payload-shape", action_id)
        key_id: str = payload["keyId"]
        if key_id not in self.evidence.bindings:
            raise _invalid("unknown-key", action_id)
        (binding,) = [b for b in self.evidence_json()["bindings"] if b["keyId"] == key_id]
        status = {"sequence": self._next_status_sequence(key_id), "recordedAt": now, **boundaries}
        evidence = self._with_bindings([{**binding, "validityHistory": [status]}], action_id)
        return RegistryDecision(
            KEY_VALIDITY_CHANGE,
            verified,
            command_hash,
            evidence=evidence,
            result={"keyId": key_id, "validityStatus": status},
        )

    def _declared_key(
        self, key: Mapping[str, Any], principal: dict[str, str], now: str
    ) -> dict[str, Any]:
        """A card's public key as a binding declaration; its boundaries become a status record
        only where they narrow the registry's effective validity (never the other way)."""
        boundaries = {k: key[k] for k in ("validUntil", "revokedAt") if k in key}
        binding = {k: v for k, v in key.items() if k not in boundaries}
        existing = self.evidence.bindings.get(key["keyId"])
        if existing is not None:
            validity = existing.validity()
            effective = {"validUntil": validity.valid_until, "revokedAt": validity.revoked_at}
            boundaries = {
                k: v
                for k, v in boundaries.items()
                if (held := effective[k]) is None or parse_timestamp(v).instant != held.instant
            }
        history = []
        if boundaries:
            sequence = self._next_status_sequence(key["keyId"])
            history.append({"sequence": sequence, "recordedAt": now, **boundaries})
        return {**binding, "principal": principal, "validityHistory": history}

    def _decide_agent_card(
        self, verified: VerifiedDocument, command_hash: str, payload: dict[str, Any], now: str
    ) -> RegistryDecision:
        action_id = verified.document["actionId"]
        card = payload.get("agentCard")
        if set(payload) != {"agentCard"} or not isinstance(card, dict):
            raise _invalid("payload-shape", action_id)
        checked = verify_value(card, PROFILES["agent-card"], self.evidence)
        if checked.principal.id != self.registry_service_id:
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                action_id=action_id,
                diagnostic=Diagnostic("authorization", "agent-card-issuer"),
            )
        if card["organizationId"] != self.organization_id:
            raise _invalid("organization-mismatch", action_id)
        agent_id: str = card["agentId"]
        result = {
            "agentId": agent_id,
            "cardVersion": card["cardVersion"],
            "agentCardHash": checked.signing_hash,
        }
        current = self.agent_cards.get(agent_id)
        if current is not None and current["cardVersion"] >= card["cardVersion"]:
            same = current["cardVersion"] == card["cardVersion"]
            if same and canonicalize(current) == canonicalize(card):
                return RegistryDecision(AGENT_CARD_REGISTER, verified, command_hash, result=result)
            raise _invalid("card-version-not-newer", action_id)
        principal = {"type": "agent", "id": agent_id}
        declared = [self._declared_key(key, principal, now) for key in card["publicKeys"]]
        evidence = self._with_bindings(declared, action_id)
        return RegistryDecision(
            AGENT_CARD_REGISTER,
            verified,
            command_hash,
            evidence=evidence,
            agent_card=card,
            result=result,
        )

    def _decide_session(
        self, verified: VerifiedDocument, command_hash: str, payload: dict[str, Any], now: str
    ) -> RegistryDecision:
        action_id = verified.document["actionId"]
        agent_id = payload.get("agentId")
        if set(payload) != {"agentId"} or not isinstance(agent_id, str):
            raise _invalid("payload-shape", action_id)
        moment = parse_timestamp(now)
        usable = [
            b
            for b in self.evidence.bindings.values()
            if b.principal.type == "agent"
            and b.principal.id == agent_id
            and b.validity().contains(moment)
        ]
        if not usable:
            raise _invalid("agent-has-no-valid-key", action_id)
        card = self.agent_cards.get(agent_id)
        if card is not None and card["status"] == "revoked":
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                action_id=action_id,
                diagnostic=Diagnostic("authorization", "agent-card-revoked"),
            )
        return RegistryDecision(
            SESSION_OPEN,
            verified,
            command_hash,
            session_agent_id=agent_id,
            result={"agentId": agent_id},
        )

    def _event(
        self, decision: RegistryDecision, result: dict[str, Any], *, now: str, event_id: str
    ) -> dict[str, Any] | None:
        """The unsigned Organization Event of an accepted change (signing happens elsewhere)."""
        if decision.kind == SESSION_OPEN:
            kind = SESSION_OPENED
            payload = {"agentId": result["agentId"], "sessionEpoch": result["sessionEpoch"]}
        elif decision.kind == AGENT_CARD_REGISTER:
            kind = AGENT_CARD_REGISTERED
            payload = {
                "agentId": result["agentId"],
                "cardVersion": result["cardVersion"],
                "agentCardHash": result["agentCardHash"],
            }
        else:
            return None
        command = decision.verified.document
        return {
            "protocolVersion": "0.1",
            "eventId": event_id,
            "kind": kind,
            "actor": command["actor"],
            "cause": {"type": "command", "id": command["actionId"]},
            "correlationId": command["correlationId"],
            "occurredAt": now,
            "payload": payload,
            "acceptedBy": {"type": "service", "id": self.registry_service_id},
            "commandHash": decision.command_hash,
        }

    def _forget_stale_actions(self, now: str) -> None:
        # A Command older than the freshness window is refused before its Action ID is looked
        # up, so remembering it longer protects nothing: the idempotency table stays bounded.
        horizon = parse_timestamp(now).instant.seconds - self.freshness.max_age_seconds - 1
        self.recent_actions = {
            key: action
            for key, action in self.recent_actions.items()
            if parse_timestamp(action.issued_at).instant.seconds >= horizon
        }

    # --- continue-as-new --------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Compact, complete state: everything a new run needs, nothing derivable."""
        return {
            "organizationId": self.organization_id,
            "registryServiceId": self.registry_service_id,
            "sessionAuthorities": sorted(self.session_authorities - {self.registry_service_id}),
            "evidence": self.evidence_json(),
            "agentCards": self.agent_cards,
            "sessionEpochs": self.session_epochs,
            "revision": self.revision,
            "recentActions": [
                {
                    "actor": actor,
                    "actionId": action_id,
                    "signingHash": action.signing_hash,
                    "issuedAt": action.issued_at,
                    "result": action.result,
                }
                for (actor, action_id), action in self.recent_actions.items()
            ],
            "freshness": {
                "maxAgeSeconds": self.freshness.max_age_seconds,
                "maxSkewSeconds": self.freshness.max_skew_seconds,
            },
            "approvedMissions": self.approved_missions,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> OrganizationRegistry:
        freshness = value["freshness"]
        return cls(
            value["organizationId"],
            value["registryServiceId"],
            RegistryEvidence.from_json(value["evidence"]),
            session_authorities=value["sessionAuthorities"],
            agent_cards=value["agentCards"],
            session_epochs=value["sessionEpochs"],
            revision=value["revision"],
            recent_actions={
                (a["actor"], a["actionId"]): RecentAction(
                    a["signingHash"], a["issuedAt"], a["result"]
                )
                for a in value["recentActions"]
            },
            freshness=FreshnessWindow(freshness["maxAgeSeconds"], freshness["maxSkewSeconds"]),
            approved_missions=value.get("approvedMissions", {}),
        )
