"""The Worker build ID, hashed from the code that can change a decision, not from every module.

A Worker given no ``build_id`` hashes the bytecode of every module the process has loaded
(``temporalio.worker.load_default_build_id``): about a thousand modules in an agent process,
each read back from its bytecode cache, or compiled again from source where there is none (a
source tree run with ``PYTHONDONTWRITEBYTECODE``): a sizeable share of an agent's start
(benchmarks/RESULTS.md). The product uses no worker versioning, so the ID only labels, in a
workflow's history, which code completed each workflow task. It is enough that it changes with
that code: the source of every loaded module that is neither the standard library's nor an
installed distribution's (the user's own code), of this product's modules wherever they are
installed, and the versions of Python and of the libraries workflow code runs on.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import sysconfig
from collections.abc import Iterator

import pydantic
import temporalio

import mwp

_PRODUCT = "mwp"


@functools.cache
def build_id() -> str:
    """This process's build ID, computed once (``mwp-<version>-<md5>``)."""
    digest = hashlib.md5(usedforsecurity=False)
    versions = (sys.version, temporalio.__version__, pydantic.VERSION, mwp.__version__)
    digest.update(" ".join(versions).encode())
    for name, path in _sources():
        digest.update(name.encode())
        try:
            with open(path, "rb") as source:
                digest.update(source.read())
        except OSError:
            continue  # a module whose file went away since: its name still counts
    return f"{_PRODUCT}-{mwp.__version__}-{digest.hexdigest()}"


def _sources() -> Iterator[tuple[str, str]]:
    """The loaded modules whose source the ID hashes, by name, with their files."""
    paths = sysconfig.get_paths()
    installed = tuple(
        {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    )
    for name, module in sorted(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        own = name == _PRODUCT or name.startswith(f"{_PRODUCT}.")
        if own or not path.startswith(installed):
            yield name, path
