"""The proof of concept's report: named checks, each with the Events or records that prove it.

A check is recorded once, passed or failed, with its proof (Event IDs and kinds, sequences,
error codes, PIDs); the report is one JSON object, and the demo exits non-zero unless every
check passed. A scene run beside others records its checks in a part of its own, which joins
the report where the demo waits for that scene: the report's order is the code's, not the
timing's."""

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
        self._record(Check(name, bool(passed), says, proof))
        self.out(f"  {'PASS' if passed else 'FAIL'}  {name}: {says}")
        return bool(passed)

    def part(self) -> Report:
        """A report for a scene run beside others: its lines are said as they come, its checks
        wait to `join` this report."""
        return Report(self.out)

    def join(self, part: Report) -> None:
        """``part``'s checks, after those recorded here so far."""
        for recorded in part.checks:
            self._record(recorded)
        part.checks = []

    def _record(self, recorded: Check) -> None:
        if any(c.name == recorded.name for c in self.checks):
            raise ValueError(f"check {recorded.name} is recorded twice")
        self.checks.append(recorded)

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
