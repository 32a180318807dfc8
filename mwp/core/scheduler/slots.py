"""Declared execution slots (MWP-WRK-011). A slot carries everything one running WorkItem may
touch, scoped to that item alone, so no state can leak between slots: the runtime hands a
capability only its slot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

CLAUSES: tuple[str, ...] = ("MWP-WRK-011",)


@dataclass(frozen=True, slots=True)
class SlotContext:
    """What one occupied slot isolates. The credentials are a *reference* the shell resolves
    to a secret scoped to this item; the side-effect namespace prefixes every idempotency key
    (Mission, WorkItem and Ownership Epoch, per MWP-WRK-031), so two slots can never collide."""

    group_id: str
    mission_id: str
    work_item_id: str
    ownership_epoch: int
    credentials_ref: str
    checkpoint_ref: str | None
    tool_budget: Mapping[str, float]
    side_effect_namespace: str


def slot_context(
    *,
    group_id: str,
    mission_id: str,
    work_item_id: str,
    ownership_epoch: int,
    checkpoint_ref: str | None,
    budget: Mapping[str, float],
) -> SlotContext:
    scope = f"{mission_id}/{work_item_id}/{ownership_epoch}"
    return SlotContext(
        group_id=group_id,
        mission_id=mission_id,
        work_item_id=work_item_id,
        ownership_epoch=ownership_epoch,
        credentials_ref=f"credentials:{group_id}/{scope}",
        checkpoint_ref=checkpoint_ref,
        tool_budget=MappingProxyType(dict(budget)),  # a copy: one slot cannot spend another's
        side_effect_namespace=scope,
    )


@dataclass(slots=True)
class ExecutionSlot:
    index: int
    context: SlotContext | None = None
    preemption_requested: bool = False

    @property
    def free(self) -> bool:
        return self.context is None


class SlotTable:
    __slots__ = ("_by_item", "_free", "slots")

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("an Agent declares at least one execution slot")
        self.slots = [ExecutionSlot(i) for i in range(count)]
        self._free = list(range(count - 1, -1, -1))  # stack: lowest index first
        self._by_item: dict[tuple[str, str], int] = {}

    @property
    def free_count(self) -> int:
        return len(self._free)

    def occupy(self, context: SlotContext) -> ExecutionSlot | None:
        key = (context.group_id, context.work_item_id)
        if key in self._by_item:
            return self.slots[self._by_item[key]]
        if not self._free:
            return None
        slot = self.slots[self._free.pop()]
        slot.context = context
        slot.preemption_requested = False
        self._by_item[key] = slot.index
        return slot

    def find(self, group_id: str, work_item_id: str) -> ExecutionSlot | None:
        index = self._by_item.get((group_id, work_item_id))
        return None if index is None else self.slots[index]

    def release(self, group_id: str, work_item_id: str) -> None:
        index = self._by_item.pop((group_id, work_item_id), None)
        if index is not None:
            slot = self.slots[index]
            slot.context = None
            slot.preemption_requested = False
            self._free.append(index)
            self._free.sort(reverse=True)
