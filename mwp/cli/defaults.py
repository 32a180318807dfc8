"""Defaults every `mwp` command shares, each overridable from the environment, so one shell (or
a test) can point all of them at another stack without repeating flags."""

from __future__ import annotations

import os

from mwp.dev.stack import DEFAULT_AGENTS_NAMESPACE, DEFAULT_ARTIFACT_PORT, DEFAULT_GATEWAY_PORT

ADDRESS_ENV = "MWP_ADDRESS"  # host:port of Temporal's frontend
UI_PORT_ENV = "MWP_UI_PORT"  # `mwp dev`'s web UI port
GATEWAY_PORT_ENV = "MWP_GATEWAY_PORT"  # `mwp dev`'s Group gateway (wss://)
ARTIFACT_PORT_ENV = "MWP_ARTIFACT_PORT"  # and its Artifacts (https://)
CONSOLE_PORT_ENV = "MWP_CONSOLE_PORT"  # the human Approval console (http://)
AGENTS_NAMESPACE_ENV = "MWP_AGENTS_NAMESPACE"  # the agents' Temporal namespace
DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_UI_PORT = 8233


def address() -> str:
    """The Temporal address a command uses when ``--address`` is not given."""
    return os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS


def port() -> int:
    """The port of :func:`address` (where `mwp dev` starts its server)."""
    return int(address().rsplit(":", 1)[1])


def ui_port() -> int:
    return int(os.environ.get(UI_PORT_ENV) or DEFAULT_UI_PORT)


def port_from(variable: str, default: int) -> int:
    """The port ``variable`` names in the environment, else ``default``."""
    return int(os.environ.get(variable) or default)


def ui_url() -> str:
    """Where the Temporal UI of `mwp dev` is (the CLI prints links into it)."""
    return f"http://127.0.0.1:{ui_port()}"


def address_help() -> str:
    return f"Temporal address (default {address()}; ${ADDRESS_ENV} sets it)"


def gateway_url() -> str:
    """The Group gateway an agent reaches when ``--gateway`` is not given (`mwp dev`'s)."""
    return f"wss://127.0.0.1:{port_from(GATEWAY_PORT_ENV, DEFAULT_GATEWAY_PORT)}"


def agents_namespace() -> str:
    """The agents' Temporal namespace (the one `mwp dev` creates beside the authority's)."""
    return os.environ.get(AGENTS_NAMESPACE_ENV) or DEFAULT_AGENTS_NAMESPACE


def gateway_artifacts_url() -> str:
    """Where `mwp dev`'s gateway serves Artifacts (``$MWP_ARTIFACT_PORT`` sets its port)."""
    return f"https://127.0.0.1:{port_from(ARTIFACT_PORT_ENV, DEFAULT_ARTIFACT_PORT)}"
