"""The proof of concept's report: named checks, each with the Events or records that prove it.

A check is recorded once, passed or failed, with its proof (Event IDs and kinds, sequences,
error codes, PIDs); the report is one JSON object, and the demo exits non-zero unless every
check passed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    says: str
    proof: Json


@dataclass
class Report:
    out: Callable[[str], None] = print
    checks: list[Check] = field(default_factory=list)
    facts: Json = field(default_factory=dict)

    def check(self, name: str, passed: bool, says: str, **proof: Any) -> bool:
        if any(c.name == name for c in self.checks):
            raise ValueError(f"check {name} is recorded twice")
        self.checks.append(Check(name, bool(passed), says, proof))
        self.out(f"  {'PASS' if passed else 'FAIL'}  {name}: {says}")
        return bool(passed)

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def to_json(self) -> Json:
        return {
            "ok": bool(self.checks) and not self.failed(),
            "passed": sum(c.passed for c in self.checks),
            "failed": [c.name for c in self.failed()],
            **self.facts,
            "checks": [
                {"name": c.name, "passed": c.passed, "says": c.says, "proof": c.proof}
                for c in self.checks
            ],
        }
