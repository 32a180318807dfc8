"""Log lines of the product's processes: readable text, or one JSON object per line.

A JSON line holds ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``, plus the
MWP fields a record knows: ``missionId``, ``workItemId`` and ``agentId`` from the workflow or
activity that logged it (Temporal's loggers attach their workflow's ID) or from ``extra=``;
``groupId`` from ``extra=``; ``code`` from ``extra=`` or from the :class:`MwpError` being
logged. Processes configure it once, through :func:`configure_logging`; the Temporal runtime's
own (Rust) log lines join them when a runtime is made with :func:`core_logging`.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import IO, Any

from temporalio import activity, workflow
from temporalio.runtime import LogForwardingConfig, LoggingConfig

from mwp.core.errors import MwpError

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MWP_FIELDS = ("missionId", "workItemId", "agentId", "groupId", "code")

# The workflow IDs of mwp.contracts (mission_workflow_id, work_item_workflow_id,
# agent_workflow_id) read back into the IDs they were made from.
_WORKFLOW_IDS = (
    re.compile(r"^mwp-work-item/(?P<missionId>[^/]+)/(?P<workItemId>[^/]+)$"),
    re.compile(r"^mwp-mission/(?P<missionId>[^/]+)$"),
    re.compile(r"^agent:(?P<agentId>.+)$"),
)


def mwp_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The MWP fields ``record`` knows (see the module docstring)."""
    fields: dict[str, Any] = {}
    for context in ("temporal_workflow", "temporal_activity"):
        info = getattr(record, context, None)
        if isinstance(info, Mapping):
            fields.update(ids_of_workflow(str(info.get("workflow_id", ""))))
    if record.exc_info and isinstance(record.exc_info[1], MwpError):
        fields["code"] = record.exc_info[1].code.value
    for name in MWP_FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            fields[name] = value
    return fields


def ids_of_workflow(workflow_id: str) -> dict[str, str]:
    for pattern in _WORKFLOW_IDS:
        match = pattern.match(workflow_id)
        if match:
            return match.groupdict()
    return {}


class JsonLineFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **mwp_fields(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


_JSON_LINES: list[bool] = [False]  # whether configure_logging chose JSON, for core_logging


def core_logging() -> LoggingConfig:
    """The Temporal runtime's log settings: its default levels, forwarded to Python logging
    (so formatted like every other line) once :func:`configure_logging` chose JSON; without
    forwarding the runtime writes plain text to stderr itself."""
    if not _JSON_LINES[0]:
        return LoggingConfig.default
    forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    return LoggingConfig(filter=LoggingConfig.default.filter, forwarding=forwarding)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure_logging` installs: a second call replaces only it."""


def configure_logging(
    log_format: str = "text", level: str | int = "INFO", stream: IO[str] | None = None
) -> logging.Handler:
    """Send every log record of the process to ``stream`` (default stderr) in ``log_format``;
    the handler installed (it replaces the one an earlier call installed)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    handler = _Handler(stream or sys.stderr)
    json_lines = log_format == "json"
    handler.setFormatter(JsonLineFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    _JSON_LINES[0] = json_lines
    # In JSON the workflow's and activity's IDs are fields; text keeps them in the message.
    workflow.logger.workflow_info_on_message = not json_lines
    activity.logger.activity_info_on_message = not json_lines
    return handler
