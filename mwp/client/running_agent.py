"""Is another runtime of this agent serving its task queue right now?

Two runtimes must not operate one Agent ID at once (MWP-IDN-008): the second opens a new
Session Epoch, and the first, fenced, can only fail its work. The Temporal server knows who
polls the agent's task queue: a worker long-polls continuously, so a poller seen within
:data:`LIVE_POLL_SECONDS` is running, unless it is a process of this host that no longer
exists (a runtime that crashed a moment ago must be restartable at once).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from mwp.contracts.agent import agent_task_queue

CLAUSES: tuple[str, ...] = ("MWP-IDN-008",)

# Longer than one long poll (the server answers an idle poll after about a minute), so a live
# worker between two polls is still seen.
LIVE_POLL_SECONDS = 75.0


@dataclass(frozen=True)
class LivePoller:
    identity: str
    seconds_ago: float


async def live_pollers(client: Client, agent_id: str) -> list[LivePoller]:
    """The workers that polled ``agent_id``'s task queue for workflow tasks lately."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=agent_task_queue(agent_id)),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = datetime.now(UTC)
    found = []
    for poller in response.pollers:
        seconds = (now - poller.last_access_time.ToDatetime(tzinfo=UTC)).total_seconds()
        if seconds <= LIVE_POLL_SECONDS and not _gone(poller.identity):
            found.append(LivePoller(poller.identity, max(seconds, 0.0)))
    return found


def _gone(identity: str) -> bool:
    """A poller identity of the SDK's default form ``pid@host`` naming a process of this host
    that has exited."""
    pid, _, host = identity.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
