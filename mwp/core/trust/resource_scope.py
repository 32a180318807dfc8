"""What a Work Contract lets its Worker touch (spec 10.1 and 12; MWP-AUT-001).

Each ``allowedResources`` entry of the contract names one resource and the operations allowed
on it. A capability token's grant is flat (a set of resources, a set of operations), so the
pairing is kept here: a token is asked and issued for no resource and no operation outside
the contract (:meth:`ResourceScope.check_grant`), and every call that names resources is
checked pair by pair (:meth:`ResourceScope.check_access`), at the runtime before anything
runs and again at the gateway. A call that touches no resource is the tool operation
:data:`INVOKE`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mwp.core.errors import Diagnostic, ErrorCode, MwpError

CLAUSES: tuple[str, ...] = ("MWP-AUT-001",)

# The operation of a tool call itself, whatever resource it touches.
INVOKE: Final = "invoke"


@dataclass(frozen=True)
class ResourceScope:
    """The (resource, operation) pairs a Work Contract allows."""

    pairs: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, contract: Mapping[str, Any]) -> ResourceScope:
        pairs = {
            (str(entry["resource"]), str(operation))
            for entry in contract.get("allowedResources", ())
            for operation in entry.get("operations", ())
        }
        return cls(frozenset(pairs))

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(resource for resource, _ in self.pairs)

    @property
    def operations(self) -> frozenset[str]:
        """Every operation a token under this contract may name: the tool's and the
        resources'."""
        return frozenset({INVOKE, *(operation for _, operation in self.pairs)})

    def check_grant(self, resources: Iterable[str], operations: Iterable[str]) -> None:
        """A grant names only resources and operations of the contract."""
        outside = sorted(set(resources) - self.resources)
        if outside:
            raise _outside(f"resources {outside} are not in the Work Contract", "grant-resource")
        outside = sorted(set(operations) - self.operations)
        if outside:
            raise _outside(f"operations {outside} are not in the Work Contract", "grant-operation")

    def check_access(self, operation: str, resources: Iterable[str]) -> None:
        """The contract allows ``operation`` on each of ``resources``."""
        for resource in sorted(set(resources)):
            if (resource, operation) not in self.pairs:
                raise _outside(
                    f"the Work Contract does not allow {operation!r} on {resource}", "access"
                )


def _outside(message: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.AUTH_FORBIDDEN, message, diagnostic=Diagnostic("resource-scope", reason)
    )
