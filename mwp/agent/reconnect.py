"""How a runtime that lost its gateway tries again.

A gateway restarted by its operator (or the demo's outage) serves again within a second or
less, so the first tries come soon and close together (a refused TCP connection costs nothing:
the demo's gateway, back 0.4 s after it died, was found at the third try, 0.48 s after the loss,
where tries at 0.25 s and 0.75 s found it 0.3 s later); a longer outage is tried less and less
often, so that a fleet of runtimes does not hammer a gateway that is down.
A connection that came up starts the schedule again. The Worker runtime
(``mwp.workers.agent``) and the Coordinator runtime (``mwp.coordinator.runtime``) share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

FIRST_SECONDS: Final = 0.1
GROWTH: Final = 1.5
MAX_SECONDS: Final = 15.0


@dataclass
class Reconnect:
    """The wait before the next try: :data:`FIRST_SECONDS`, growing by :data:`GROWTH` up to
    :data:`MAX_SECONDS`, back to the first once a connection came up."""

    delay: float = FIRST_SECONDS

    def connected(self) -> None:
        self.delay = FIRST_SECONDS

    def next_wait(self) -> float:
        wait = self.delay
        self.delay = min(wait * GROWTH, MAX_SECONDS)
        return wait
