"""The stack's ports are picked below the kernel's ephemeral range, where no connection is
given one meanwhile, each bindable when picked and none picked twice."""

from __future__ import annotations

import socket
import sys

import pytest

from mwp.dev import ports

PICKS = 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the range is Linux's")
def test_picked_ports_are_below_the_ephemeral_range_bindable_and_never_repeated() -> None:
    picked = [ports.free_port() for _ in range(PICKS)]
    assert len(set(picked)) == PICKS
    assert all(ports.LOW <= p < ports._ephemeral_low() for p in picked)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", picked[-1]))  # free when picked, free now


def test_a_port_in_use_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        monkeypatch.setattr(ports, "LOW", busy)
        monkeypatch.setattr(ports, "HIGH", busy + 1)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: busy + 10)
        assert ports.free_port() != busy
