"""The one configuration of every Worker and Replayer the product starts: :class:`MwpPlugin`.

Workflows run in Temporal's sandbox, which re-imports workflow code for every run and refuses
I/O, clocks and randomness there, so a determinism slip fails a workflow task instead of
forking a Group's history. Only the modules below are shared with the host process instead of
re-imported, each for its reason; workflow modules import everything else plainly (never
inside ``workflow.unsafe.imports_passed_through()``), so this list is the whole exception.

When the process traces (:mod:`mwp.workers.tracing`), the plugin also gives every Worker and
Replayer the process's tracing interceptor (a Worker whose client already has it keeps one).
A Worker given no build ID gets :func:`~mwp.workers.build_id.build_id`, cheaper to compute than
the SDK's default.
"""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.plugin import SimplePlugin
from temporalio.worker import UnsandboxedWorkflowRunner, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from mwp.workers.build_id import build_id
from mwp.workers.tracing import active_interceptors

SANDBOX_PASSTHROUGH: Mapping[str, str] = {
    "mwp.core": (
        "the pure protocol core: deterministic by construction, imports nothing with I/O "
        "(tests/layout checks), and its Pydantic models and schemas are costly to rebuild for "
        "every workflow run"
    ),
    "mwp.contracts": (
        "names, IDs and the dataclasses workflows exchange with activities and clients: no I/O; "
        "shared so that a payload converted outside the sandbox has the class the workflow expects"
    ),
    "cryptography": "native bindings the sandbox cannot import a second time",
    "nacl": "native bindings (strict Ed25519 verification), the same reason",
}

PLUGIN_NAME = "mwp"


def sandboxed_runner() -> WorkflowRunner:
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*SANDBOX_PASSTHROUGH)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def _runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    # Workers and Replayers default to a sandbox with the SDK's own restrictions, which
    # re-imports the native crypto bindings per run: always replace it. Only an explicit
    # UnsandboxedWorkflowRunner stays (the benchmark that measures what the sandbox costs).
    if isinstance(existing, UnsandboxedWorkflowRunner):
        return existing
    return sandboxed_runner()


class MwpPlugin(SimplePlugin):
    """Configures a Worker or Replayer the way production runs workflows: in the narrow sandbox
    above, traced when the process traces."""

    def __init__(self) -> None:
        super().__init__(
            PLUGIN_NAME, workflow_runner=_runner, interceptors=active_interceptors() or None
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        versioned = ("build_id", "deployment_config", "use_worker_versioning")
        if not any(config.get(key) for key in versioned):
            config["build_id"] = build_id()
        return config
