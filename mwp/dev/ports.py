"""A free TCP port, in a module of its own: `mwp demo` picks its ports before the command line
imports the stack (``mwp.demo.head_start``)."""

from __future__ import annotations

import socket


def free_port(ip: str = "127.0.0.1") -> int:
    """A TCP port free on ``ip`` right now (for tests; another process may take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((ip, 0))
        port: int = probe.getsockname()[1]
        return port
