"""The authority worker's key work, asked for by a workflow: sealing a message, the sealing
key, signing Evidence (``activities/seal.py``, ``activities/evidence.py``). The keys never
enter workflow history; only the worker holding them runs these.

Runs begun under ``patches.MISSION_AUTHORITY_ACTIVITIES`` (or the registry's) run them as
activities; earlier runs replay them as the local activities they were (that patch says why).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

TIMEOUT = timedelta(seconds=10)


async def key_work(
    name: str, arg: Any, *, as_activity: bool, summary: str | None = None
) -> dict[str, Any]:
    """The result of the authority activity ``name`` on ``arg``."""
    if as_activity:
        result: dict[str, Any] = await workflow.execute_activity(
            name, arg, result_type=dict, start_to_close_timeout=TIMEOUT, summary=summary
        )
        return result
    result = await workflow.execute_local_activity(
        name, arg, result_type=dict, start_to_close_timeout=TIMEOUT, summary=summary
    )
    return result
