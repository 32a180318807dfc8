"""Asking a parent Group to charge a child Mission's usage (an activity of MissionWorkflow).

A workflow can signal another but cannot send it an Update, and a child Mission must hear its
parent's decision before it records usage (``mwp.core.group.child_usage``). So the child hands
its sealed request to this activity, on the authority worker, which sends the parent's
``child_usage`` Update with the worker's own Temporal client and returns the parent's answer.
The parent's refusal comes back as the same typed MWP error, never retried; a parent that is
rolling over (``BACKPRESSURE``) or unreachable is asked again by Temporal's retry policy, and a
request the parent already decided finds its Event again.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from mwp.contracts.errors import from_temporal_failure, to_application_error
from mwp.contracts.mission import CHARGE_PARENT, UPDATE_CHILD_USAGE, ParentCharge
from mwp.core.errors import ErrorCode


@activity.defn(name=CHARGE_PARENT)
async def charge_parent(request: ParentCharge) -> dict[str, Any]:
    """The parent's answer (``ChildCharged.answer``) to the charge, or its refusal."""
    handle = activity.client().get_workflow_handle(request.parent_workflow_id)
    try:
        answer: dict[str, Any] = await handle.execute_update(
            UPDATE_CHILD_USAGE, request.sealed, result_type=dict
        )
    except WorkflowUpdateFailedError as exc:
        error = from_temporal_failure(exc)
        if error is None:
            raise
        if error.code == ErrorCode.BACKPRESSURE:  # the parent asks to be asked again shortly
            raise ApplicationError(error.message or "the parent Group is busy") from None
        raise to_application_error(error, error.occurred_at) from None
    return answer
