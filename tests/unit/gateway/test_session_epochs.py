"""The gateway's view of each Agent's Session Epoch: at most SESSION_CHECK_SECONDS old, and a
Session this gateway opened is current here at once, without asking the Registry again."""

from __future__ import annotations

import asyncio

from mwp.gateway.authority import SessionEpochs

WINDOW = 0.2


class Registry:
    def __init__(self, epochs: dict[str, int]) -> None:
        self.epochs = epochs
        self.asked = 0

    async def session_epochs(self) -> dict[str, int]:
        self.asked += 1
        return dict(self.epochs)


def _now() -> float:
    return asyncio.get_running_loop().time()


async def test_a_session_opened_here_is_current_at_once_without_a_registry_query() -> None:
    registry = Registry({"a": 1, "b": 4})
    epochs = SessionEpochs(registry.session_epochs, WINDOW)
    assert await epochs.of("a") == 1
    assert registry.asked == 1
    registry.epochs["a"] = 2
    epochs.opened("a", 2, _now())  # the old session of "a" is fenced here at once...
    assert await epochs.of("a") == 2
    assert registry.asked == 1  # ...from the opening's own answer
    await asyncio.sleep(WINDOW)  # the shared look is stale; the opening is too
    assert await epochs.of("b") == 4
    assert registry.asked == 2  # another Agent's epoch is looked up again, as before


async def test_a_stale_shared_look_is_not_needed_within_the_opening_window() -> None:
    registry = Registry({"a": 1})
    epochs = SessionEpochs(registry.session_epochs, WINDOW)
    await epochs.of("a")
    await asyncio.sleep(WINDOW)  # the shared look is stale now
    registry.epochs["a"] = 2
    epochs.opened("a", 2, _now())
    assert await epochs.of("a") == 2
    assert registry.asked == 1


async def test_the_opening_is_trusted_only_for_the_window_and_a_newer_session_wins() -> None:
    registry = Registry({"a": 2, "b": 6})
    epochs = SessionEpochs(registry.session_epochs, WINDOW)
    epochs.opened("a", 2, _now() - WINDOW)  # asked a window ago: no longer trusted alone
    registry.epochs["a"] = 3  # another gateway opened a newer Session meanwhile
    assert await epochs.of("a") == 3
    assert registry.asked == 1
    epochs.opened("b", 5, _now())  # the shared look, fresh, holds a newer one still
    assert await epochs.of("b") == 6
    assert registry.asked == 1
