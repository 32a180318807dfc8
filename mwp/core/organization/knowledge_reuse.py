"""The Organization's Knowledge Reuse Policy (spec 13.3): which Mission may give an Artifact to
which, and the approval it signs when one may (pure: no I/O, no clock of its own).

The operators write the policy as JSON (``mwp dev`` and ``mwp gateway`` read
``<state-dir>/knowledge-reuse.json``, see docs/gateway.md)::

    {"rules": [{"name": "fixes-to-hotfixes",
                "sourceMissions": ["urn:mwp:mission:..."],   # or "*": any of the Organization
                "targetMissions": "*",
                "maxClassification": "internal",           # the most sensitive content it gives
                "ceiling": "internal",                     # the receiving Mission's clearance
                "validSeconds": 3600}]}                    # how long an approval is good

No policy, or no rule that matches, approves nothing: Group content never crosses by default.
A rule's ``maxClassification`` (default: its ``ceiling``) may not exceed its ``ceiling``, nor the
ceiling the Group Authority accepts (:data:`~mwp.core.group.knowledge.MAX_REUSE_CEILING`); a
Mission never gives to itself. The first rule that allows decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from mwp.core.group.knowledge import CLASSIFICATIONS, MAX_REUSE_CEILING, rank
from mwp.core.trust.signed_document import signing_hash
from mwp.core.wire.values import format_utc, is_identifier

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-WRK-028",)

ANY: Final = "*"
DEFAULT_VALID_SECONDS: Final = 3600
_RULE_MEMBERS: Final = frozenset(
    ("name", "sourceMissions", "targetMissions", "maxClassification", "ceiling", "validSeconds")
)


@dataclass(frozen=True)
class ReuseRule:
    """One rule of the policy: Missions named by ID (None: any Mission of the Organization)."""

    name: str
    sources: frozenset[str] | None
    targets: frozenset[str] | None
    max_classification: str
    ceiling: str
    valid_seconds: int = DEFAULT_VALID_SECONDS

    def allows(self, source_mission_id: str, target_mission_id: str, classification: str) -> bool:
        return (
            (self.sources is None or source_mission_id in self.sources)
            and (self.targets is None or target_mission_id in self.targets)
            and classification in CLASSIFICATIONS
            and rank(classification) <= rank(self.max_classification)
        )


@dataclass(frozen=True)
class ReuseDecision:
    """The rule that approves, or None and why not (for the operators' log, never the asker)."""

    rule: ReuseRule | None
    reason: str


@dataclass(frozen=True)
class ReusePolicy:
    rules: tuple[ReuseRule, ...] = ()

    @classmethod
    def from_json(cls, value: Any) -> ReusePolicy:
        """The policy a document states; ``ValueError`` naming the first fault."""
        if not isinstance(value, Mapping) or set(value) != {"rules"}:
            raise ValueError('a Knowledge Reuse Policy is {"rules": [...]}')
        rules = value["rules"]
        if not isinstance(rules, list):
            raise ValueError("rules: must be a list")
        parsed = tuple(_rule(r, i) for i, r in enumerate(rules))
        names = [r.name for r in parsed]
        if len(set(names)) != len(names):
            raise ValueError("rules: each name once")
        return cls(parsed)

    def decide(
        self, source_mission_id: str, target_mission_id: str, classification: str
    ) -> ReuseDecision:
        """Whether content of ``classification`` from the source Mission may be approved for
        the target Mission, and under which rule."""
        if source_mission_id == target_mission_id:
            return ReuseDecision(None, "same-mission")
        for rule in self.rules:
            if rule.allows(source_mission_id, target_mission_id, classification):
                return ReuseDecision(rule, f"rule:{rule.name}")
        missions = [
            r
            for r in self.rules
            if (r.sources is None or source_mission_id in r.sources)
            and (r.targets is None or target_mission_id in r.targets)
        ]
        if missions:
            return ReuseDecision(None, "classification-above-rules:" + missions[0].name)
        return ReuseDecision(None, "no-rule")


def _missions(value: Any, member: str) -> frozenset[str] | None:
    if value == ANY:
        return None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str) and is_identifier(v) for v in value)
    ):
        raise ValueError(f'{member}: "*" or a non-empty list of Mission IDs')
    return frozenset(value)


def _rule(value: Any, index: int) -> ReuseRule:
    at = f"rules[{index}]"
    if not isinstance(value, Mapping):
        raise ValueError(f"{at}: must be an object")
    unknown = sorted(set(value) - _RULE_MEMBERS)
    if unknown:
        raise ValueError(f"{at}: unknown members {unknown}")
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{at}.name: a rule is named")
    ceiling = value.get("ceiling")
    if ceiling not in CLASSIFICATIONS or rank(ceiling) > rank(MAX_REUSE_CEILING):
        allowed = list(CLASSIFICATIONS[: rank(MAX_REUSE_CEILING) + 1])
        raise ValueError(f"{at}.ceiling: one of {allowed}")
    highest = value.get("maxClassification", ceiling)
    if highest not in CLASSIFICATIONS or rank(highest) > rank(ceiling):
        raise ValueError(f"{at}.maxClassification: a classification at most the ceiling")
    valid = value.get("validSeconds", DEFAULT_VALID_SECONDS)
    if isinstance(valid, bool) or not isinstance(valid, int) or not 0 < valid <= 86400:
        raise ValueError(f"{at}.validSeconds: 1 to 86400")
    return ReuseRule(
        name,
        _missions(value.get("sourceMissions"), f"{at}.sourceMissions"),
        _missions(value.get("targetMissions"), f"{at}.targetMissions"),
        highest,
        ceiling,
        valid,
    )


def approval_document(
    manifest: Mapping[str, Any],
    *,
    approval_id: str,
    target_mission_id: str,
    target_group_id: str,
    ceiling: str,
    approved_by: Mapping[str, Any],
    now: datetime,
    valid_seconds: int,
) -> Json:
    """The unsigned Knowledge Reuse Approval of the Artifact ``manifest`` describes (as its
    producer signed it) for the target Mission and Group, cleared up to ``ceiling``."""
    now = now.replace(microsecond=0)
    return {
        "approvalId": approval_id,
        "sourceMissionId": manifest["missionId"],
        "sourceGroupId": manifest["groupId"],
        "artifactId": manifest["artifactId"],
        "contentHash": manifest["contentHash"],
        "manifestHash": signing_hash(manifest),
        "classification": manifest["classification"],
        "targetMissionId": target_mission_id,
        "targetGroupId": target_group_id,
        "classificationCeiling": ceiling,
        "approvedBy": dict(approved_by),
        "approvedAt": format_utc(now),
        "expiresAt": format_utc(now + timedelta(seconds=valid_seconds)),
    }
