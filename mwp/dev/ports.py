"""A free TCP port, in a module of its own: `mwp demo` picks its ports before the command line
imports the stack (``mwp.demo.head_start``).

A port is picked below the kernel's range of ephemeral ports: the stack's processes bind the
ports picked for them a moment later, and meanwhile any connection, or the Temporal server's
own services, may be given an ephemeral port (in one demo run of about forty, the console's
port, picked by the kernel from that range, was taken before the console bound it). A port
handed out here is not handed out again by this process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Below Linux's default ephemeral range (32768 to 60999), above the ports services register.
LOW, HIGH = 10_000, 32_767
ATTEMPTS = 50
_given: set[int] = set()


def free_port(ip: str = "127.0.0.1") -> int:
    """A TCP port free on ``ip`` right now, outside the ephemeral range where one is known
    (another process may still take it before it is bound)."""
    high = min(HIGH, _ephemeral_low() - 1)
    for _ in range(ATTEMPTS if high > LOW else 0):
        port = random.randint(LOW, high)
        if port not in _given and not port_in_use(ip, port):
            _given.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:  # the kernel's choice
        probe.bind((ip, 0))
        chosen: int = probe.getsockname()[1]
        _given.add(chosen)
        return chosen


def port_in_use(ip: str, port: int) -> bool:
    """Whether a TCP port on ``ip`` cannot be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((ip, port))
        except OSError:
            return True
        return False


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux), else the usual one."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768
