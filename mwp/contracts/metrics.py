"""The product's Prometheus metrics: the names the workflows emit and operators scrape.

Workflows record them through ``workflow.metric_meter()``, which records nothing while a
workflow replays history and adds no Command to it: metrics are neither replayed nor part of a
workflow's decisions, so emitting them needs no ``workflow.patched``. A workflow task that
fails and is retried runs live again and may count twice. The meter labels every series with
``namespace``, ``task_queue`` and ``workflow_type``; a worker exports them only when its
Temporal client was connected with a runtime that has Prometheus telemetry
(``mwp.workers.authority.metrics_runtime``). ``docs/operations.md`` lists them.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import MetricCounter, MetricGauge

# The first port of the range Prometheus exporters conventionally take; `--metrics-port`
# without a value binds it.
DEFAULT_METRICS_PORT = 9464

COMMANDS_ACCEPTED = "mwp_commands_accepted"  # label duplicate: "true" | "false"
COMMANDS_REFUSED = "mwp_commands_refused"  # label code: the MWP error code
MIRROR_LAG = "mwp_mirror_lag_events"  # label group_id
# The Group gateway's open WebSocket connections (label: authenticated "true" | "false").
GATEWAY_CONNECTIONS = "mwp_gateway_connections"

# Temporal's own histogram of a workflow task's execution on the worker (ms): for a
# MissionWorkflow that is the validator's and handler's decision and apply of its Commands. The
# sandbox refuses clocks in workflow code, so the product measures no latency of its own.
DECISION_LATENCY = "temporal_workflow_task_execution_latency"


class CommandMetrics:
    """One workflow's instruments, created on first use (only inside workflow code)."""

    def __init__(self) -> None:
        self._accepted: MetricCounter | None = None
        self._refused: MetricCounter | None = None
        self._lag: MetricGauge | None = None

    def accepted(self, *, duplicate: bool) -> None:
        if self._accepted is None:
            self._accepted = workflow.metric_meter().create_counter(
                COMMANDS_ACCEPTED, "Commands the Authority accepted (duplicates answered again)"
            )
        self._accepted.add(1, {"duplicate": "true" if duplicate else "false"})

    def refused(self, code: str) -> None:
        if self._refused is None:
            self._refused = workflow.metric_meter().create_counter(
                COMMANDS_REFUSED, "Commands the Authority refused, by MWP error code"
            )
        self._refused.add(1, {"code": code})

    def mirror_lag(self, group_id: str, events: int) -> None:
        if self._lag is None:
            self._lag = workflow.metric_meter().create_gauge(
                MIRROR_LAG, "Events accepted and not yet in the Group Event log", "events"
            )
        self._lag.set(events, {"group_id": group_id})
