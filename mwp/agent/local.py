"""A local runner for unit tests of capabilities (no Temporal, no Group Authority).

:class:`LocalCapabilityRunner` calls a declared capability in-process with a
:class:`~mwp.agent.context.CapabilityContext` whose tool calls go through a real
:class:`~mwp.agent.ledger.ToolLedger` over the given object store, and whose Commands are
built with the real builders, checked, and collected in ``commands`` instead of being sent.
It proves that a capability's logic, tool keys, Evidence mapping and checkpoint/resume
behave; it proves nothing about leases, fencing, scheduling or crash recovery, which belong
to the Temporal agent runtime and its integration tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from mwp.agent.actions import (
    WorkItemFacts,
    accepts_idempotency_key,
    publish_command,
    resolve_tool,
)
from mwp.agent.context import Blocked, CapabilityContext, Preempted
from mwp.agent.declaration import Agent, CapabilitySpec
from mwp.agent.ledger import ToolLedger
from mwp.agent.progress import (
    OwnerCommand,
    Progress,
    Submission,
    block_command,
    checkpoint_command,
    progress_command,
    submit_command,
)
from mwp.client import utc_now
from mwp.core.idempotency import tool_key
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.stores.artifacts import ArtifactStore
from mwp.stores.objects import ObjectStore


@dataclass(frozen=True)
class LocalOutcome:
    """How a local run ended: ``submitted``, ``blocked`` or ``preempted``, and its Command."""

    status: str
    command: OwnerCommand
    submission: Submission | None = None
    state: Any = None


class _LocalContext(WorkItemFacts):
    def __init__(self, runner: LocalCapabilityRunner, lease_id: str) -> None:
        super().__init__(
            runner.mission_id,
            runner.group_id,
            runner.work_item_id,
            runner.ownership_epoch,
            runner.contract,
        )
        self._runner = runner
        self._lease_id = lease_id

    @property
    def resume_state(self) -> Any:
        return self._runner.resume_state

    @property
    def preemption_requested(self) -> bool:
        return self._runner.preemption_requested

    async def read_artifact(self, content_hash: str) -> bytes:
        return self._runner.artifacts.get(content_hash)

    async def tool(
        self, op_id: str, fn: Callable[..., Awaitable[Any]] | str, /, *args: Any, **kwargs: Any
    ) -> Any:
        r = self._runner
        fn = resolve_tool(r.agent, fn)
        key = tool_key(r.mission_id, r.work_item_id, r.ownership_epoch, op_id)
        r.tool_keys.append((op_id, key))
        return await r.ledger.run_once(
            key, fn, *args, pass_key=accepts_idempotency_key(fn), **kwargs
        )

    async def publish(
        self,
        data: bytes,
        *,
        media_type: str,
        schema_uri: str,
        source_hashes: Sequence[str] = (),
    ) -> str:
        r = self._runner
        content = r.artifacts.put(data)
        r.commands.append(
            publish_command(
                r.agent,
                r.spec,
                content,
                media_type=media_type,
                schema_uri=schema_uri,
                source_hashes=source_hashes,
                mission_id=r.mission_id,
                group_id=r.group_id,
                work_item_id=r.work_item_id,
                ownership_epoch=r.ownership_epoch,
                lease_id=self._lease_id,
                created_at=r.now(),
            )
        )
        return content.content_hash

    async def progress(self, progress: Progress) -> None:
        r = self._runner
        r.commands.append(
            progress_command(
                r.work_item_id,
                ownership_epoch=r.ownership_epoch,
                lease_id=self._lease_id,
                progress=progress,
            )
        )

    async def checkpoint(self, progress: Progress, state: Any = None) -> None:
        r = self._runner
        ref = None if state is None else sha256_ref(canonicalize(state))
        command = checkpoint_command(
            r.work_item_id,
            ownership_epoch=r.ownership_epoch,
            lease_id=self._lease_id,
            progress=progress,
            checkpoint_ref=ref,
        )
        r.resume_state = state  # a crashed or resumed run starts again from here
        if r.preemption_requested:
            r.commands.append(command)
            raise Preempted(state)
        # Not preempted: the progress goes with the lease renewal and execution continues.
        r.commands.append(
            progress_command(
                r.work_item_id,
                ownership_epoch=r.ownership_epoch,
                lease_id=self._lease_id,
                progress=progress,
            )
        )

    async def block(self, resolution: str, *, progress: Progress | None = None) -> NoReturn:
        r = self._runner
        r.commands.append(
            block_command(
                r.work_item_id,
                ownership_epoch=r.ownership_epoch,
                lease_id=self._lease_id,
                required_resolution=resolution,
                progress=progress,
            )
        )
        raise Blocked(resolution)


class LocalCapabilityRunner:
    """Runs one WorkItem's capability locally, for unit tests (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        contract: Mapping[str, Any],
        store: ObjectStore,
        *,
        mission_id: str = "urn:mwp:mission:local",
        group_id: str = "urn:mwp:group:local",
        work_item_id: str = "urn:mwp:work-item:local",
        ownership_epoch: int = 1,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        spec = agent.capability_for(contract["requiredCapabilities"])
        if spec is None:
            raise LookupError(f"{agent.agent_id} declares none of the required capabilities")
        self.agent = agent
        self.spec: CapabilitySpec = spec
        self.contract = contract
        self.artifacts = ArtifactStore(store)
        self.ledger = ToolLedger(store, artifacts=self.artifacts)
        self.mission_id = mission_id
        self.group_id = group_id
        self.work_item_id = work_item_id
        self.ownership_epoch = ownership_epoch
        self.now = clock
        self.commands: list[OwnerCommand] = []
        self.tool_keys: list[tuple[str, str]] = []
        self.resume_state: Any = None
        self.preemption_requested = False
        self._leases = 0

    def request_preemption(self) -> None:
        """Ask the capability to stop at its next checkpoint."""
        self.preemption_requested = True

    async def run(self) -> LocalOutcome:
        """One start of the capability, until it submits, blocks or is preempted."""
        self._leases += 1
        lease_id = f"urn:mwp:lease:local:{self._leases}"
        context: CapabilityContext = _LocalContext(self, lease_id)
        try:
            submission = await self.spec.fn(context)
        except Preempted as stop:
            self.preemption_requested = False
            return LocalOutcome("preempted", self.commands[-1], state=stop.state)
        except Blocked:
            return LocalOutcome("blocked", self.commands[-1])
        command = submit_command(
            self.work_item_id,
            ownership_epoch=self.ownership_epoch,
            lease_id=lease_id,
            submission=submission,
            contract=self.contract,
        )
        self.commands.append(command)
        return LocalOutcome("submitted", command, submission=submission)
