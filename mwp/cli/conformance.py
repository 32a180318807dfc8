"""`mwp conformance`: run the protocol bundle's structural, cryptography and admission suites."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from mwp.conformance import runner

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_ROOT = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "conformance",
        help="run the MWP 0.1 conformance bundles",
        description=(
            "Run the conformance bundles of a MissionWeaveProtocol 0.1 protocol root. Exits 0 "
            "when every evaluation passes, 1 on any mismatch, 2 when the root is unusable."
        ),
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help=f"protocol bundle root (default: ${runner.ROOT_ENV}, else {runner.DEFAULT_ROOT})",
    )
    parser.add_argument(
        "--bundle",
        choices=runner.BUNDLES,
        action="append",
        help="run only this bundle (repeatable; default: all three)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print only {"<bundle>": {"passed": P, "total": T}, ...} on stdout',
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root: Path = args.root if args.root is not None else runner.default_root()
    bundles = tuple(dict.fromkeys(args.bundle)) if args.bundle else runner.BUNDLES
    try:
        runner.check_root(root, bundles)
    except runner.InvalidRootError as exc:
        print(f"mwp conformance: error: {exc}", file=sys.stderr)
        return EXIT_BAD_ROOT
    root = root.resolve()

    if args.json:
        # stdout must carry the JSON object alone, whatever a suite might print while running.
        with contextlib.redirect_stdout(sys.stderr):
            results = runner.run_bundles(root, bundles)
        print(json.dumps(runner.summary(results)))
        for result in results:
            for line in runner.format_mismatches(result):
                print(line.strip(), file=sys.stderr)
    else:
        results = runner.run_bundles(root, bundles)
        print(runner.format_report(results, root))
    return EXIT_OK if runner.all_passed(results) else EXIT_MISMATCH
