"""Six-stage verifications and signings per second of the conformance ``command.json``.

Run: ``make bench`` (or ``.venv/bin/python -m benchmarks.signed_documents``). One process,
one core. The document is the structural bundle's valid Command, re-signed by a fresh key of
ours (its own signature is a placeholder); every verification starts from its exact bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence
from mwp.core.trust.signed_document import sign, verify
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.core.wire.values import parse_timestamp

REPO = Path(__file__).resolve().parent.parent


def _root() -> Path:
    configured = os.environ.get("MWP_PROTOCOL_ROOT", "../shared/mwp-0.1")
    root = Path(configured)
    return root if root.is_absolute() else (REPO / root).resolve()


def _rate(label: str, action: Callable[[], object], seconds: float, rounds: int) -> float:
    """Best-of-rounds operations per second (the least disturbed round)."""
    rates = []
    for _ in range(rounds):
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(50):
                action()
            count += 50
            now = time.perf_counter()
            if now >= deadline:
                break
        rates.append(count / (now - start))
    best = max(rates)
    print(f"{label:<64} {best:>9.0f}/s  (median {statistics.median(rates):.0f}/s)")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    root = _root()
    document = parse_bytes((root / "conformance/vectors/valid/command.json").read_bytes())
    key = SigningKey.generate()
    actor = document["actor"]
    key_id = "urn:example:key:bench-coordinator"
    binding = KeyBinding(
        key_id,
        Principal(actor["type"], actor["id"]),
        "Ed25519",
        key.public_key,
        parse_timestamp("2026-01-01T00:00:00Z"),
        (),
    )
    registry = RegistryEvidence.from_bindings("urn:example:organization:bench", [binding])
    raw_registry = registry.to_json()
    signed = sign(document, "command", key_id, key)
    data = json.dumps(signed, indent=2).encode()  # wire bytes, not canonical order
    verify(data, "command", registry)  # warm caches and prove the input verifies

    print(f"python {platform.python_version()} on {platform.machine()}, one process")
    verify_rate = _rate(
        "verify (six stages, validated Registry evidence)",
        lambda: verify(data, "command", registry),
        args.seconds,
        args.rounds,
    )
    _rate(
        "verify (six stages, Registry evidence re-validated each time)",
        lambda: verify(data, "command", raw_registry),
        args.seconds,
        args.rounds,
    )
    _rate(
        "sign (JCS + Ed25519)",
        lambda: sign(document, "command", key_id, key),
        args.seconds,
        args.rounds,
    )
    _rate("JCS of the unsigned Command", lambda: canonicalize(document), args.seconds, args.rounds)
    print(f"target: >= 2000 verifications/s -> {'met' if verify_rate >= 2000 else 'NOT met'}")


if __name__ == "__main__":
    main()
