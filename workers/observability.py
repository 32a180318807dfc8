"""The observability flags every long-running process of the product shares.

``--log-format text|json`` and ``--log-level`` choose how the process logs
(:mod:`mwp.workers.log_format`); ``--otel-endpoint URL``, or the ``OTEL_EXPORTER_OTLP_ENDPOINT``
environment variable, turns on OpenTelemetry tracing over OTLP (:mod:`mwp.workers.tracing`).
A command adds them with :func:`add_observability_args`, calls :func:`configure_observability`
before it connects, connects its Temporal client with the result's ``interceptors`` and calls
its ``shutdown`` before the process exits (spans are exported in batches).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from temporalio.runtime import Runtime, TelemetryConfig

from mwp.workers.log_format import LOG_FORMATS, configure_logging, core_logging
from mwp.workers.tracing import (
    INSTALL_HINT,
    OTLP_ENDPOINT_ENV,
    Tracing,
    TracingUnavailableError,
    enable_tracing,
)

__all__ = [
    "Observability",
    "TracingUnavailableError",
    "add_observability_args",
    "configure_observability",
]


def add_observability_args(parser: argparse.ArgumentParser, *, log_level: str = "INFO") -> None:
    """The logs and tracing flags; ``log_level`` is the default level (a command whose own
    output is its lines, like `mwp agent run`, logs only warnings unless asked)."""
    group = parser.add_argument_group("logs and tracing")
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="log lines on stderr: text (default) or json, one object per line",
    )
    group.add_argument(
        "--log-level",
        default=log_level,
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help=f"the least severe level logged (default {log_level})",
    )
    group.add_argument(
        "--otel-endpoint",
        metavar="URL",
        help=(
            f"export OpenTelemetry traces over OTLP to URL (default: ${OTLP_ENDPOINT_ENV}; "
            f"neither: no tracing). Needs the otel extra: {INSTALL_HINT}"
        ),
    )


@dataclass(frozen=True)
class Observability:
    """What :func:`configure_observability` set up."""

    tracing: Tracing | None

    @property
    def interceptors(self) -> list[Any]:
        """For ``Client.connect(interceptors=...)``: empty unless tracing is on."""
        return self.tracing.interceptors if self.tracing else []

    @property
    def otel_endpoint(self) -> str | None:
        return None if self.tracing is None else self.tracing.endpoint

    def shutdown(self) -> None:
        if self.tracing is not None:
            self.tracing.shutdown()


def configure_observability(args: argparse.Namespace, *, service_name: str) -> Observability:
    """Configure logging and (if an endpoint is set) tracing from the parsed flags.

    Raises :class:`TracingUnavailableError` when tracing is asked for without the otel extra.
    """
    configure_logging(args.log_format, args.log_level)
    if args.log_format == "json":
        # Clients connected from now on forward the Temporal runtime's own lines to logging.
        runtime = Runtime(telemetry=TelemetryConfig(logging=core_logging()))
        Runtime.set_default(runtime, error_if_already_set=False)
    endpoint = args.otel_endpoint or os.environ.get(OTLP_ENDPOINT_ENV) or None
    if endpoint is None:
        return Observability(None)
    return Observability(enable_tracing(service_name=service_name, endpoint=endpoint))
