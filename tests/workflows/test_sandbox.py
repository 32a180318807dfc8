"""The narrow sandbox: workflows import plainly, and only the pure core, the contracts and the
crypto bindings are shared with the host; everything else is re-imported per workflow run."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from mwp.workers.plugin import SANDBOX_PASSTHROUGH, MwpPlugin
from mwp.workflows import patches

WORKFLOW_SOURCES = sorted(Path(patches.__file__).parent.glob("*.py"))


def _configured(runner: object) -> object:
    config = MwpPlugin().configure_replayer({"workflow_runner": runner})  # type: ignore[typeddict-item]
    return config["workflow_runner"]


def test_no_workflow_module_passes_its_imports_through_by_hand() -> None:
    for path in WORKFLOW_SOURCES:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Attribute):
                assert node.attr != "imports_passed_through", f"{path.name}:{node.lineno}"


def test_the_plugin_replaces_the_default_sandbox_with_the_narrow_one() -> None:
    runner = _configured(SandboxedWorkflowRunner())
    assert isinstance(runner, SandboxedWorkflowRunner)
    shared = runner.restrictions.passthrough_modules
    assert set(SANDBOX_PASSTHROUGH) <= shared
    assert not {"mwp", "mwp.workflows", "mwp.client", "mwp.dev", "mwp.agent"} & shared


def test_only_the_core_and_the_contracts_of_the_package_are_shared() -> None:
    runner = _configured(SandboxedWorkflowRunner())
    assert isinstance(runner, SandboxedWorkflowRunner)
    shared = {m for m in runner.restrictions.passthrough_modules if m.startswith("mwp")}
    assert shared == {"mwp.core", "mwp.contracts"}


def test_every_shared_module_exists_and_says_why() -> None:
    for module, reason in SANDBOX_PASSTHROUGH.items():
        assert importlib.util.find_spec(module) is not None, module
        assert len(reason.split()) >= 5, module


def test_an_explicitly_unsandboxed_runner_is_kept_for_the_benchmark() -> None:
    runner = UnsandboxedWorkflowRunner()
    assert _configured(runner) is runner
