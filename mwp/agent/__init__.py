"""The Agent SDK: declare an Agent, write capabilities and tools as plain async functions.

See ``docs/agents.md``. Pure parts (declaration, idempotency keys, progress and submissions)
have no I/O; the :class:`ToolLedger` uses an object store; the Temporal agent runtime that
hosts capabilities as activities builds on these.
"""

from mwp.agent.context import (
    Blocked,
    CapabilityContext,
    CapabilityFailure,
    CapabilityStopped,
    Preempted,
    ResourceAccess,
)
from mwp.agent.declaration import (
    ANY_OBJECT,
    Agent,
    AgentDeclarationError,
    CapabilitySpec,
    CardInfo,
    SchemaRef,
    ToolSpec,
)
from mwp.agent.ledger import ToolLedger, ToolLedgerError, ToolRecord
from mwp.agent.local import LocalCapabilityRunner, LocalOutcome
from mwp.agent.progress import (
    EvidenceItem,
    OwnerCommand,
    Progress,
    Submission,
    block_command,
    checkpoint_command,
    progress_command,
    submit_command,
)
from mwp.agent.signals import SchedulerSignals
from mwp.agent.usage import Spent
from mwp.core.group.resource_usage import ResourceUsage
from mwp.core.idempotency import attempt_key, tool_key

__all__ = [
    "ANY_OBJECT",
    "Agent",
    "AgentDeclarationError",
    "Blocked",
    "CapabilityContext",
    "CapabilityFailure",
    "CapabilitySpec",
    "CapabilityStopped",
    "CardInfo",
    "EvidenceItem",
    "LocalCapabilityRunner",
    "LocalOutcome",
    "OwnerCommand",
    "Preempted",
    "Progress",
    "ResourceAccess",
    "ResourceUsage",
    "SchedulerSignals",
    "SchemaRef",
    "Spent",
    "Submission",
    "ToolLedger",
    "ToolLedgerError",
    "ToolRecord",
    "ToolSpec",
    "attempt_key",
    "block_command",
    "checkpoint_command",
    "progress_command",
    "submit_command",
    "tool_key",
]
