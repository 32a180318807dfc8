"""OpenTelemetry tracing of Commands, workflows and activities (the optional ``otel`` extra).

:func:`enable_tracing` builds a tracer provider exporting over OTLP and one Temporal
``TracingInterceptor`` for the process. A client connected with :attr:`Tracing.interceptors`
opens a span per Update, start and query it sends and carries its context in the Temporal
headers; every Worker or Replayer configured by :class:`mwp.workers.plugin.MwpPlugin` gets the
same interceptor, so the workflow's handling of that Update and the activities it schedules
(the mirror among them) become child spans, whichever process runs them.

The provider is this module's, never OpenTelemetry's global one: the global provider can be
set only once per process, and tests enable and disable tracing several times.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

# The OpenTelemetry SDK's own settings, honoured as every OTel exporter does.
OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTLP_PROTOCOL_ENV = "OTEL_EXPORTER_OTLP_PROTOCOL"  # "grpc" (default) or "http/protobuf"
INSTALL_HINT = "pip install 'missionweave-temporal[otel]'"


class TracingUnavailableError(RuntimeError):
    """Tracing was asked for but the ``otel`` extra is not installed (the message says how)."""


@dataclass(frozen=True)
class Tracing:
    """The process's tracing: the interceptor to connect clients with, and its provider."""

    interceptor: Any  # temporalio.contrib.opentelemetry.TracingInterceptor
    provider: TracerProvider
    endpoint: str | None = None  # None: the exporter's settings, or the caller's exporter

    @property
    def interceptors(self) -> list[Any]:
        return [self.interceptor]

    def shutdown(self) -> None:
        """Export what is still buffered, then stop (before the process exits)."""
        if self in _current:
            _current.remove(self)
        self.provider.shutdown()


_current: list[Tracing] = []  # at most one: the tracing of this process


def enable_tracing(
    *,
    service_name: str,
    endpoint: str | None = None,
    exporter: SpanExporter | None = None,
) -> Tracing:
    """Trace this process: spans go to ``exporter``, else over OTLP to ``endpoint`` (else to
    the ``OTEL_EXPORTER_OTLP_*`` settings). Replaces any tracing enabled before."""
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError as exc:
        raise TracingUnavailableError(
            f"tracing needs the OpenTelemetry SDK ({exc.name} is missing): {INSTALL_HINT}"
        ) from None
    disable_tracing()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    if exporter is not None:  # given by the caller (tests): export each span as it ends
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(endpoint)))
    tracing = Tracing(TracingInterceptor(provider.get_tracer("mwp")), provider, endpoint)
    _current.append(tracing)
    return tracing


def _otlp_exporter(endpoint: str | None) -> SpanExporter:
    try:
        if os.environ.get(OTLP_PROTOCOL_ENV, "grpc").startswith("http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
    except ImportError as exc:
        raise TracingUnavailableError(
            f"tracing needs the OTLP exporter ({exc.name} is missing): {INSTALL_HINT}"
        ) from None
    return OTLPSpanExporter(endpoint=endpoint)


def active_interceptors() -> list[Any]:
    """The tracing interceptor for Workers, if tracing is enabled (else nothing)."""
    return [_current[0].interceptor] if _current else []


def disable_tracing() -> None:
    """Flush and stop the tracing of this process, if any."""
    while _current:
        _current[0].shutdown()
