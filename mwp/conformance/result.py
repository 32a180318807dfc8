"""The outcome of running one conformance bundle."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Mismatch:
    """One evaluation whose outcome differs from the bundle's expectation."""

    evaluation: str
    expected: str
    actual: str


@dataclass
class BundleResult:
    name: str  # "structural" | "cryptography" | "admission"
    total: int = 0
    passed: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    def record(self, evaluation: str, expected: str, actual: str) -> None:
        self.total += 1
        if expected == actual:
            self.passed += 1
        else:
            self.mismatches.append(Mismatch(evaluation, expected, actual))

    def fail(self, evaluation: str, problem: str) -> None:
        """A problem with the bundle itself (digest, missing file): counts as a failed check."""
        self.total += 1
        self.mismatches.append(Mismatch(evaluation, "bundle intact", problem))

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.passed == self.total
