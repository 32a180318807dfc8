"""An Agent whose tools have an external side-effect counter, for the tool-call tests.

Configured by environment (so ``mwp agent run tests.integration.tool_agent:agent`` in a
subprocess and the in-process tests share it): ``MWP_TEST_AGENT_ID`` and
``MWP_TEST_AGENT_ORG`` name the agent and its Organization, ``MWP_TEST_AGENT_KEY_DIR`` keeps
its key across processes, ``MWP_TEST_TOOL_EFFECTS`` is the "external system": a folder where
each effect is a file named by its idempotency key (created exclusively, so the system
dedupes by key) and every call of a tool appends a line to ``calls.log``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

from mwp.agent import Agent, CapabilityContext, CardInfo, Submission
from mwp.client import Identity, KeyStore
from mwp.core.trust.registry import Principal

AGENT_ID = os.environ.get("MWP_TEST_AGENT_ID", "urn:mwp:agent:tool-tester")
ORGANIZATION_ID = os.environ.get("MWP_TEST_AGENT_ORG", "urn:mwp:organization:dev")
KEY_NAME = "agent-tool-tester"


def _identity() -> Identity:
    key_dir = os.environ.get("MWP_TEST_AGENT_KEY_DIR")
    principal = Principal("agent", AGENT_ID)
    if not key_dir:
        return Identity.generate(principal)
    keys = KeyStore(Path(key_dir))
    if not keys.exists(KEY_NAME):
        keys.save(KEY_NAME, Identity.generate(principal))
    return keys.load(KEY_NAME)


agent = Agent(
    AGENT_ID,
    _identity(),
    card=CardInfo(ORGANIZATION_ID, Principal("human", "urn:mwp:human:tester"), "Tool tester"),
)


def effects_dir() -> Path:
    return Path(os.environ["MWP_TEST_TOOL_EFFECTS"])


def effect_keys(root: Path, name: str) -> list[str]:
    """The idempotency keys (hex) of the effects ``name`` had in the external system."""
    folder = root / "effects" / name
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def call_count(root: Path, name: str) -> int:
    """How often a tool was called (not answered from the ledger) for ``name``."""
    log = root / "calls.log"
    return log.read_text().split().count(name) if log.exists() else 0


def _called(name: str) -> None:
    root = effects_dir()
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "calls.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{name}\n".encode())
    finally:
        os.close(fd)


def _effect(name: str, key: str) -> bool:
    """The external system: one effect per key (a second request with it is a no-op)."""
    folder = effects_dir() / "effects" / name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(folder / key.removeprefix("sha256:"), os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


@agent.tool("effect")
async def effect(name: str, *, idempotency_key: str) -> dict[str, Any]:
    _called(name)
    _effect(name, idempotency_key)
    return {"name": name, "nonce": uuid.uuid4().hex}


@agent.tool("slow-effect")
async def slow_effect(name: str, hold: float, *, idempotency_key: str) -> dict[str, Any]:
    """Makes its effect, then holds for ``hold`` seconds before returning (the window
    between the external effect and the recorded result); a repeat returns at once."""
    _called(name)
    if _effect(name, idempotency_key):
        await asyncio.sleep(hold)
    return {"name": name, "nonce": uuid.uuid4().hex}


@agent.tool("flaky")
async def flaky(name: str) -> dict[str, Any]:
    """Raises on its first call for ``name``, then succeeds."""
    _called(name)
    marker = effects_dir() / f"{name}.failed-once"
    if not marker.exists():
        marker.touch()
        raise RuntimeError(f"{name}: the first call fails")
    return {"name": name, "nonce": uuid.uuid4().hex}


@agent.capability("mwp.test.tools", "1.0.0")
async def use_tools(ctx: CapabilityContext) -> Submission:
    raise NotImplementedError("only the tools are exercised")
