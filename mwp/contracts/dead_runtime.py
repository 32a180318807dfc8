"""A Coordinator runtime that dies mid-decision, and how soon the next one takes the decision up.

A restarted Coordinator runtime asks again for every decision it had not applied; one that
is still running (same Group, Coordinator Epoch, handler and key: the same workflow ID) it
attaches to and waits for, and its loop takes no other step meanwhile, in any Group. A
SIGKILLed process tells Temporal nothing: whatever part of that decision it held, Temporal
gives to another worker only once a timeout says the holder is gone. With the SDK's and this
project's earlier defaults the restarted runtime idled, and every Group it coordinates with it:

- a workflow task the dead worker had taken: the workflow task timeout, 10 s by default;
- the handler's activity attempt it was running: the heartbeat timeout (30 s before), then
  the first retry interval;
- the next workflow task, put on the dead worker's sticky queue: the sticky queue's
  schedule-to-start timeout.

A decision's tasks are small (one activity scheduled, its answer returned; a history of about
ten events), so each of these can be short: a workflow task gets ``DECISION_TASK_TIMEOUT``,
the handler heartbeats well within ``DECISION_HEARTBEAT_SECONDS`` (its timeout), and the
Coordinator's worker caches no decision workflow (``DECISION_WORKFLOW_CACHE``), so there is no
sticky queue to be left on: each task replays the short history on whichever worker takes it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

# A decision workflow's task: a worker that took one and died is given up on after this.
DECISION_TASK_TIMEOUT: Final = timedelta(seconds=2)
# The handler activity's heartbeat timeout (it beats three times as often): an attempt whose
# process died is tried again after this and the retry interval.
DECISION_HEARTBEAT_SECONDS: Final = 3.0
# Decision workflows the Coordinator's worker keeps cached: none (no sticky queue).
DECISION_WORKFLOW_CACHE: Final = 0
