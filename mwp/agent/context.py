"""What a capability function receives: the :class:`CapabilityContext` interface.

A capability is ``async def fn(ctx: CapabilityContext) -> Submission``. Everything it does to
the world goes through ``ctx``, so the runtime can fence it (Ownership Epoch, Execution Lease),
record it and resume it. This module is the interface only; the Temporal implementation
(activities on the agent's task queue, lease heartbeats, signed Commands to the Group
Authority) comes with the agent worker. :class:`mwp.agent.local.LocalCapabilityRunner` is a
local runner for unit tests of capabilities, not a substitute for that runtime.

Control flow: ``checkpoint`` is the only safe preemption point. It always records the state
to resume from (a crashed attempt restarts from the latest one); without a preemption request
its progress goes with the next lease renewal and the capability continues. When the Scheduler
has asked for preemption, it sends ``work.checkpoint`` and raises :class:`Preempted`; the
capability lets it propagate and is later called again with ``ctx.resume_state`` set to the
state it checkpointed. ``block`` records the block and raises :class:`Blocked`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, runtime_checkable

from mwp.agent.progress import Progress
from mwp.core.group.resource_usage import ResourceUsage

__all__ = [
    "Blocked",
    "CapabilityContext",
    "CapabilityFailure",
    "CapabilityStopped",
    "Preempted",
    "ResourceAccess",
    "ResourceUsage",
]


@dataclass(frozen=True)
class ResourceAccess:
    """What a tool call touches: ``operation`` on each of ``resources``, as the Work
    Contract's ``allowedResources`` name them (``ctx.tool(..., access=...)``)."""

    operation: str
    resources: tuple[str, ...]


class CapabilityStopped(Exception):  # noqa: N818 (a control-flow signal)
    """The capability must stop now; the runtime has already recorded why."""


class Preempted(CapabilityStopped):
    """Raised by ``checkpoint`` when preemption was requested: the checkpoint is recorded."""

    def __init__(self, state: Any) -> None:
        super().__init__("preempted at a checkpoint")
        self.state = state


class Blocked(CapabilityStopped):
    """Raised by ``block``: the block and its required resolution are recorded."""

    def __init__(self, required_resolution: str) -> None:
        super().__init__(f"blocked: {required_resolution}")
        self.required_resolution = required_resolution


class CapabilityFailure(Exception):  # noqa: N818 (what the capability raises)
    """Raise from a capability to fail with a failure code (``UPPER_SNAKE``).

    A code the Work Contract's ``retryPolicy.retryableFailures`` lists is retried within
    ``maxAttempts`` and its backoff; anything else (and any other exception, reported as
    ``CAPABILITY_ERROR``) records ``work.fail`` with Evidence of the failure."""

    def __init__(self, message: str, *, code: str = "CAPABILITY_FAILED") -> None:
        super().__init__(message)
        self.code = code


@runtime_checkable
class CapabilityContext(Protocol):
    """The capability's view of its WorkItem and the runtime's services."""

    @property
    def mission_id(self) -> str: ...

    @property
    def group_id(self) -> str: ...

    @property
    def work_item_id(self) -> str: ...

    @property
    def ownership_epoch(self) -> int: ...

    @property
    def contract(self) -> Mapping[str, Any]:
        """The Work Contract (read-only)."""
        ...

    @property
    def input_artifacts(self) -> Sequence[str]:
        """The contract's input Artifact hashes."""
        ...

    @property
    def resume_state(self) -> Any:
        """The state of the latest checkpoint (None on a first start)."""
        ...

    @property
    def preemption_requested(self) -> bool: ...

    async def read_artifact(self, content_hash: str) -> bytes:
        """An Artifact's bytes, hash-checked."""
        ...

    async def tool(
        self,
        op_id: str,
        fn: Callable[..., Awaitable[Any]] | str,
        /,
        *args: Any,
        spend: ResourceUsage | None = None,
        access: ResourceAccess | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run a tool (a function or a registered tool's name) once per ``op_id``.

        The idempotency key is :func:`mwp.core.idempotency.tool_key` of this WorkItem, its
        Ownership Epoch and ``op_id``; a tool with an ``idempotency_key`` keyword parameter
        receives it, to pass on to the external system.

        Usage: a call that executes is charged one ``toolCallLimit`` plus ``spend`` (what it
        is known to cost, checked first: a call that would pass what the WorkItem has left is
        not run and the item is blocked), plus the ``usage`` of a
        :class:`~mwp.agent.usage.Spent` the tool returns (its ``result`` is the call's
        result). A call answered from the ledger is not charged again.

        ``access`` names the resources the call touches and the operation on them: a pair
        the Work Contract's ``allowedResources`` do not allow is refused (``AUTH_FORBIDDEN``)
        before anything runs, and the capability token is presented for exactly that access.
        """
        ...

    async def publish(
        self,
        data: bytes,
        *,
        media_type: str,
        schema_uri: str,
        source_hashes: Sequence[str] = (),
    ) -> str:
        """Store ``data`` as an Artifact of this WorkItem and publish its signed manifest;
        returns the content hash."""
        ...

    async def progress(self, progress: Progress) -> None:
        """Report structured progress (with the next lease renewal)."""
        ...

    async def checkpoint(self, progress: Progress, state: Any = None) -> None:
        """Record a safe point with the JSON ``state`` to resume from; raises
        :class:`Preempted` after recording if preemption was requested."""
        ...

    async def block(self, resolution: str, *, progress: Progress | None = None) -> NoReturn:
        """Record ``work.block`` with the required resolution; raises :class:`Blocked`."""
        ...

    async def record_usage(self, usage: ResourceUsage) -> Mapping[str, Any]:
        """Charge what the run consumed to the WorkItem and its budget ancestry
        (``resource_usage_record``); returns the recorded Event's payload: ``cumulative``
        usage and what ``remaining`` the item may still consume. One dimension over a budget
        refuses the whole record with ``MwpError`` ``BUDGET_EXCEEDED`` (nothing is charged)."""
        ...
