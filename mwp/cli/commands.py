"""The `mwp` subcommands, one module each.

A command module exposes `register(subparsers)`, which adds its parser and sets the `handler`
default to a function `(argparse.Namespace) -> int` returning the exit code (it returns it
and never ends the process: `mwp.cli.run` does, for every command). Registration must
stay cheap: import heavy dependencies (Temporal, jsonschema) inside the handler, so one
command's dependencies never slow down or break another.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from types import ModuleType

from mwp.cli import (
    agent,
    conformance,
    console,
    coordinator,
    demo,
    dev,
    gateway,
    log,
    mission,
    registry,
)

Handler = Callable[[argparse.Namespace], int]

# To add a command: write its module next to this one and list it here.
COMMANDS: tuple[ModuleType, ...] = (
    agent,
    conformance,
    console,
    coordinator,
    demo,
    dev,
    gateway,
    log,
    mission,
    registry,
)
