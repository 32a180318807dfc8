"""Runs the protocol bundle's conformance suites and reports them for people and for machines."""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mwp.conformance.result import BundleResult

ROOT_ENV = "MWP_PROTOCOL_ROOT"
DEFAULT_ROOT = "../shared/mwp-0.1"

# Bundle name -> module exposing `run(root: Path) -> BundleResult`. Imported only when run,
# so one unfinished or broken suite cannot stop the others from loading.
RUNNER_MODULES: Mapping[str, str] = {
    "structural": "mwp.conformance.structural",
    "cryptography": "mwp.conformance.cryptography",
    "admission": "mwp.conformance.admission",
}
BUNDLES: tuple[str, ...] = tuple(RUNNER_MODULES)

# What a bundle root must contain before a suite is worth starting.
_REQUIRED_FILES: Mapping[str, tuple[str, ...]] = {
    "structural": ("conformance/manifest.json",),
    "cryptography": ("cryptography/manifest.json",),
    "admission": ("admission/manifest.json", "cryptography/manifest.json"),
}


class InvalidRootError(Exception):
    """The given path is not a usable protocol bundle root."""


def default_root(base: Path | None = None) -> Path:
    """`$MWP_PROTOCOL_ROOT`, else the sibling shared bundle; relative paths are taken from
    `base` (the current directory when None)."""
    raw = os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    path = Path(raw).expanduser()
    return path if path.is_absolute() or base is None else base / path


def check_root(root: Path, bundles: Iterable[str] = BUNDLES) -> None:
    """Raise InvalidRootError unless `root` has the schemas and each chosen bundle's manifest."""
    if not root.exists():
        raise InvalidRootError(f"protocol root {root} does not exist")
    if not root.is_dir():
        raise InvalidRootError(f"protocol root {root} is not a directory")
    needed = {"schemas/common.schema.json"}
    for bundle in bundles:
        needed.update(_REQUIRED_FILES[bundle])
    missing = sorted(path for path in needed if not (root / path).is_file())
    if missing:
        raise InvalidRootError(
            f"protocol root {root} is not an MWP 0.1 bundle: missing {', '.join(missing)}"
        )


def run_bundle(name: str, root: Path) -> BundleResult:
    """Run one suite; a suite that cannot load or crashes is reported as a failed check."""
    try:
        module = importlib.import_module(RUNNER_MODULES[name])
        result = module.run(root)
    except Exception as exc:
        failed = BundleResult(name)
        failed.fail(f"{name} runner", _crash(exc))
        return failed
    if not isinstance(result, BundleResult):
        failed = BundleResult(name)
        failed.fail(f"{name} runner", f"returned {type(result).__name__}, not a BundleResult")
        return failed
    return result


def run_bundles(root: Path, bundles: Sequence[str] = BUNDLES) -> list[BundleResult]:
    return [run_bundle(name, root) for name in bundles]


def all_passed(results: Iterable[BundleResult]) -> bool:
    # An empty suite proves nothing, so it does not pass.
    return all(result.ok and result.total > 0 for result in results)


def summary(results: Iterable[BundleResult]) -> dict[str, dict[str, int]]:
    """The machine-readable summary: `{bundle: {"passed": P, "total": T}}`."""
    return {result.name: {"passed": result.passed, "total": result.total} for result in results}


def format_report(results: Sequence[BundleResult], root: Path) -> str:
    """The human report: one line per bundle, each mismatch under it, then a verdict line."""
    lines = [f"MissionWeaveProtocol 0.1 conformance, bundle root {root}"]
    for result in results:
        status = "ok" if result.ok and result.total > 0 else "FAILED"
        lines.append(f"{result.name}: {result.passed}/{result.total} passed  [{status}]")
        lines.extend(format_mismatches(result))
    passed = sum(result.passed for result in results)
    total = sum(result.total for result in results)
    verdict = "PASS" if all_passed(results) else "FAIL"
    names = ", ".join(result.name for result in results)
    lines.append(f"{verdict}: {passed}/{total} evaluations passed ({names})")
    return "\n".join(lines)


def format_mismatches(result: BundleResult) -> list[str]:
    return [
        f"  MISMATCH {result.name} / {mismatch.evaluation}: "
        f"expected {mismatch.expected}, actual {mismatch.actual}"
        for mismatch in result.mismatches
    ]


def _crash(exc: Exception) -> str:
    if isinstance(exc, ImportError):
        return f"runner unavailable: {type(exc).__name__}: {exc}"
    # Keep the innermost frame: enough to find the bug without a full traceback in the report.
    frame = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {frame[0].filename}:{frame[0].lineno}" if frame else ""
    return f"runner crashed: {type(exc).__name__}: {exc}{where}"
