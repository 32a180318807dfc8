"""`mwp conformance`: exit codes, the exact JSON shape and the human report."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from mwp.cli import main
from mwp.conformance import runner
from mwp.conformance.result import BundleResult
from tests.conformance.test_structural import copy_bundle, rewrite_manifest
from tests.protocol_root import REPO

FULL_TOTALS = {"structural": 58, "cryptography": 62, "admission": 30}


def mwp(*args: str, root_env: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a fresh interpreter, from the repository root."""
    env = dict(os.environ)
    env.pop(runner.ROOT_ENV, None)
    if root_env is not None:
        env[runner.ROOT_ENV] = root_env
    return subprocess.run(
        [sys.executable, "-m", "mwp", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def require(*names: str) -> None:
    """The modules behind `names` (module or module:attribute) must import: a failure fails."""
    for name in names:
        module_name, _, attribute = name.partition(":")
        module = importlib.import_module(module_name)
        if attribute:
            getattr(module, attribute)


def assert_summary_shape(stdout: str, bundles: list[str]) -> dict[str, dict[str, int]]:
    assert stdout.endswith("\n") and stdout.count("\n") == 1, "exactly one line on stdout"
    summary = json.loads(stdout)
    assert list(summary) == bundles
    for counts in summary.values():
        assert set(counts) == {"passed", "total"}
        assert all(type(value) is int for value in counts.values())
        assert 0 <= counts["passed"] <= counts["total"]
    return summary  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- full runs


def test_full_conformance_passes_with_exact_json(protocol_root_path: Path) -> None:
    require(
        "mwp.core.models:validate_document",
        "mwp.conformance.cryptography",
        "mwp.conformance.admission",
    )
    # No --root: the root comes from the environment, as in CI.
    completed = mwp("conformance", "--json", root_env=str(protocol_root_path))
    assert completed.returncode == 0, completed.stderr
    summary = assert_summary_shape(completed.stdout, list(FULL_TOTALS))
    assert summary == {
        name: {"passed": total, "total": total} for name, total in FULL_TOTALS.items()
    }


def test_structural_human_report_passes(protocol_root_path: Path) -> None:
    require("mwp.core.models:validate_document")
    completed = mwp("conformance", "--root", str(protocol_root_path), "--bundle", "structural")
    assert completed.returncode == 0, completed.stdout
    lines = completed.stdout.splitlines()
    assert "structural: 58/58 passed  [ok]" in lines
    assert lines[-1] == "PASS: 58/58 evaluations passed (structural)"


def test_single_bundle_json_shape(protocol_root_path: Path) -> None:
    # Holds whether or not the models have landed; the exit code must agree with the counts.
    completed = mwp(
        "conformance", "--root", str(protocol_root_path), "--bundle", "structural", "--json"
    )
    summary = assert_summary_shape(completed.stdout, ["structural"])
    counts = summary["structural"]
    assert counts["total"] == 58
    assert completed.returncode == (0 if counts["passed"] == 58 else 1)


# --------------------------------------------------------------------------- failures


def test_mismatch_exits_1_and_is_named(protocol_root_path: Path, tmp_path: Path) -> None:
    root = copy_bundle(protocol_root_path, tmp_path / "bundle")
    rewrite_manifest(root, "valid Mission", valid=False)
    completed = mwp("conformance", "--root", str(root), "--bundle", "structural")
    assert completed.returncode == 1
    out = completed.stdout
    assert "structural: " in out and "[FAILED]" in out
    assert (
        "MISMATCH structural / valid Mission (conformance/vectors/valid/mission.json): "
        "expected invalid, actual schema verdict valid" in out
    )
    assert "MISMATCH structural / structural content digest" in out
    assert out.splitlines()[-1].startswith("FAIL: ")


def test_mismatch_in_json_mode_keeps_stdout_clean(protocol_root_path: Path, tmp_path: Path) -> None:
    root = copy_bundle(protocol_root_path, tmp_path / "bundle")
    rewrite_manifest(root, "valid Mission", valid=False)
    completed = mwp("conformance", "--root", str(root), "--bundle", "structural", "--json")
    assert completed.returncode == 1
    summary = assert_summary_shape(completed.stdout, ["structural"])
    assert summary["structural"]["passed"] < summary["structural"]["total"]
    assert "MISMATCH structural / valid Mission" in completed.stderr


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_missing_root_exits_2(tmp_path: Path, json_flag: list[str]) -> None:
    missing = tmp_path / "nowhere"
    completed = mwp("conformance", "--root", str(missing), *json_flag)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert f"protocol root {missing} does not exist" in completed.stderr


def test_root_that_is_not_a_bundle_exits_2(tmp_path: Path) -> None:
    completed = mwp("conformance", "--root", str(tmp_path))
    assert completed.returncode == 2
    assert "is not an MWP 0.1 bundle: missing" in completed.stderr
    assert "conformance/manifest.json" in completed.stderr


def test_root_that_is_a_file_exits_2(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    assert main(["conformance", "--root", str(file)]) == 2


def test_root_defaults_to_the_environment(tmp_path: Path) -> None:
    completed = mwp("conformance", "--json", root_env=str(tmp_path / "from-env"))
    assert completed.returncode == 2
    assert "from-env does not exist" in completed.stderr


def test_root_defaults_to_the_shared_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runner.ROOT_ENV, raising=False)
    assert runner.default_root(REPO) == REPO / "../shared/mwp-0.1"
    monkeypatch.setenv(runner.ROOT_ENV, "/abs/bundle")
    assert runner.default_root(REPO) == Path("/abs/bundle")


# --------------------------------------------------------------------------- argument handling


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["conformance", "--bundle", "nonsense"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--help"]) == 0
    assert "--bundle {structural,cryptography,admission}" in capsys.readouterr().out


# --------------------------------------------------------------------------- runner behaviour


def test_a_suite_that_cannot_load_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(runner.RUNNER_MODULES, "admission", "mwp.conformance.no_such_suite")
    result = runner.run_bundle("admission", Path("."))
    assert (result.passed, result.total) == (0, 1)
    assert result.mismatches[0].actual.startswith("runner unavailable: ModuleNotFoundError")


def test_json_stdout_stays_clean_when_a_suite_prints(
    protocol_root_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    noisy = types.ModuleType("noisy_suite")

    def run(root: Path) -> BundleResult:
        print("progress chatter")
        result = BundleResult("structural")
        result.record("only", "valid", "valid")
        return result

    noisy.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "noisy_suite", noisy)
    monkeypatch.setitem(runner.RUNNER_MODULES, "structural", "noisy_suite")
    code = main(
        ["conformance", "--root", str(protocol_root_path), "--bundle", "structural", "--json"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out) == {"structural": {"passed": 1, "total": 1}}
    assert "progress chatter" in captured.err


def test_an_empty_suite_does_not_pass() -> None:
    assert not runner.all_passed([BundleResult("structural")])
