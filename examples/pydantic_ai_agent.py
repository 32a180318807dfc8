"""An LLM framework as a capability: a pydantic-ai agent summarizes the input Artifacts.

Run it: `mwp registry add-agent summarizer --owner ada`, then `mwp agent run
examples.pydantic_ai_agent:agent`. Without ``MWP_LLM_MODEL`` the model is :func:`scripted_model`,
an offline stand-in; ``MWP_LLM_MODEL=openai:gpt-5`` (any pydantic-ai model name, with its
provider installed: ``pip install 'pydantic-ai-slim[openai]'``) uses a real one.

**Why through ``ctx.tool``, not pydantic-ai's Temporal integration.** A capability already runs
inside the agent runtime's ``run_capability`` activity, under the WorkItem's Execution Lease.
``pydantic_ai.durable_exec.temporal`` is durable only when the pydantic-ai run is a Temporal
workflow (in an activity it runs as a plain agent) whose model requests and tools are its
activities: that would be a second workflow per WorkItem beside the Worker Scheduler, its
activities keyed by Temporal activity IDs (which repeat after continue-as-new and differ across
retries) and acting without checking the lease. :class:`ThroughCtxTool` instead makes each model
request and each tool call one ``ctx.tool`` call, recorded once under ``tool_key(Mission, WorkItem,
Ownership Epoch, op ID)`` (MWP-WRK-031): a retried, crashed or preempted-and-resumed run replays
the conversation from the ledger without asking the model again, a fenced run can make no call
(``LeaseLost``), and every call counts against the contract's ``toolCallLimit``. The price is the
one a Temporal workflow pays too: op IDs are run steps, so the run must be deterministic given its
recorded results. It is: the prompt comes from the contract, and every model answer and tool result
from the ledger.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pydantic_ai
from pydantic import BaseModel
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    ValidatedToolArgs,
    WrapModelRequestHandler,
    WrapToolExecuteHandler,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_core import to_jsonable_python

from mwp.agent import (
    Agent,
    CapabilityContext,
    CardInfo,
    EvidenceItem,
    Progress,
    SchemaRef,
    Submission,
)
from mwp.client import Identity, KeyStore
from mwp.client.state_dir import organization_id_of
from mwp.core.trust.registry import Principal

CAPABILITY = ("example.artifacts.summarize", "1.0.0")


class CriterionCheck(BaseModel):
    criterion_id: str
    met: bool
    reason: str


class Summary(BaseModel):
    """The agent's typed output: published as the Artifact; its checks become the Evidence."""

    title: str
    text: str
    checks: list[CriterionCheck]


SUMMARY_SCHEMA = SchemaRef.of("urn:mwp:schema:example:summary", Summary.model_json_schema())


@dataclass
class ThroughCtxTool(AbstractCapability[CapabilityContext]):
    """pydantic-ai hooks (a pydantic-ai "capability", not an MWP one) that make each model
    request of one agent run the ``ctx.tool`` call ``<op>:model:<step>`` and each tool call
    ``<op>:tool:<step>:<call ID>``.

    Both results are kept as JSON, and the recorded JSON is what the run goes on with, so a
    first run and a replay from the ledger build the same next request."""

    op: str

    async def wrap_model_request(
        self,
        ctx: RunContext[CapabilityContext],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        async def ask_model() -> Any:
            response = await handler(request_context)
            return ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]

        recorded = await ctx.deps.tool(f"{self.op}:model:{ctx.run_step}", ask_model)
        [response] = ModelMessagesTypeAdapter.validate_python([recorded])
        assert isinstance(response, ModelResponse)
        return response

    async def wrap_tool_execute(
        self,
        ctx: RunContext[CapabilityContext],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        async def run_tool() -> Any:
            return to_jsonable_python(await handler(args))

        # The call ID comes from the recorded model response, so it is stable across replays.
        op_id = f"{self.op}:tool:{ctx.run_step}:{call.tool_call_id}"
        return await ctx.deps.tool(op_id, run_tool)


summarizer = pydantic_ai.Agent(
    output_type=Summary,
    deps_type=CapabilityContext,
    instructions=(
        "You summarize documents. Read every input with read_input, then return a title, a short "
        "summary, and for each acceptance criterion whether the summary meets it and why."
    ),
)


@summarizer.tool
async def read_input(run: RunContext[CapabilityContext], index: int) -> str:
    """The text of input number ``index`` (counting from 0)."""
    hashes = run.deps.input_artifacts
    if not 0 <= index < len(hashes):
        raise ModelRetry(
            f"there are {len(hashes)} inputs: index must be from 0 to {len(hashes) - 1}"
        )
    return (await run.deps.read_artifact(hashes[index])).decode(errors="replace")  # hash-checked


def prompt(ctx: CapabilityContext) -> str:
    criteria = [
        f"- {c['criterionId']}: {c['description']}" for c in ctx.contract["acceptanceCriteria"]
    ]
    return "\n".join(
        [
            f"Goal: {ctx.contract['goal']}",
            f"There are {len(ctx.input_artifacts)} inputs.",
            "Acceptance criteria:",
            *criteria,
        ]
    )


def evidence(ctx: CapabilityContext, summary: Summary) -> list[EvidenceItem]:
    """One Evidence entry per acceptance criterion, with the agent's verdict as its result (a
    criterion the agent did not address is ``inconclusive``)."""
    verdicts = {c.criterion_id: "passed" if c.met else "failed" for c in summary.checks}
    return [
        EvidenceItem(
            f"{ctx.work_item_id}:evidence:{c['criterionId']}",
            [c["criterionId"]],
            verdicts.get(c["criterionId"], "inconclusive"),
        )
        for c in ctx.contract["acceptanceCriteria"]
    ]


def build(
    agent_id: str, identity: Identity, organization_id: str, *, model: Model | str | None = None
) -> Agent:
    """The declaration, its summarize capability served by ``model`` (offline by default)."""
    owner = Principal("human", "urn:mwp:human:ada")
    agent = Agent(agent_id, identity, card=CardInfo(organization_id, owner, "Summarizer"))

    @agent.capability(*CAPABILITY, output_schema=SUMMARY_SCHEMA)
    async def summarize(ctx: CapabilityContext) -> Submission:
        run = await summarizer.run(
            prompt(ctx),
            deps=ctx,
            model=model or scripted_model(),
            capabilities=[ThroughCtxTool("summarize")],
        )
        soon = datetime.now(UTC) + timedelta(minutes=5)
        # A safe point to preempt: a resumed run replays the agent run from the ledger.
        await ctx.checkpoint(
            Progress("summarized", ["inputs read"], "publish", revised_estimate=soon)
        )
        content = await ctx.publish(
            run.output.model_dump_json().encode(),
            media_type="application/json",
            schema_uri=SUMMARY_SCHEMA.uri,
        )
        return Submission([content], evidence(ctx, run.output))

    return agent


def scripted_model() -> FunctionModel:
    """A deterministic, offline stand-in for an LLM: it reads every input the prompt announces,
    then summarizes them by their first lines and says every criterion is met."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = next(
            p.content
            for m in messages
            for p in m.parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        )
        read = [str(p.content) for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        announced = re.search(r"There are (\d+) inputs", asked)
        count = int(announced[1]) if announced else 0
        if count and not read:
            return ModelResponse([ToolCallPart("read_input", {"index": i}) for i in range(count)])
        checks = [
            {"criterion_id": c, "met": True, "reason": f"the summary covers all {count} inputs"}
            for c in re.findall(r"^- ([\w.-]+):", asked, re.M)
        ]
        text = "\n".join(r.splitlines()[0] if r else "" for r in read)
        output = {
            "title": asked.splitlines()[0].removeprefix("Goal: "),
            "text": text,
            "checks": checks,
        }
        return ModelResponse([ToolCallPart(info.output_tools[0].name, output)])

    return FunctionModel(respond)


def __getattr__(name: str) -> Agent:
    """``agent``, built on first use (like ``examples/writer.py``, from the state dir's key), so
    that importing this module, as the tests do, needs no key."""
    if name != "agent":
        raise AttributeError(name)
    state = Path(os.environ.get("MWP_STATE_DIR", ".mwp"))
    identity = KeyStore.in_state_dir(state).load("agent-summarizer")
    built = build(
        "urn:mwp:agent:summarizer",
        identity,
        organization_id_of(state),
        model=os.environ.get("MWP_LLM_MODEL"),
    )
    globals()["agent"] = built
    return built
