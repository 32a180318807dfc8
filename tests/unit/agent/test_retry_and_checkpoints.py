"""A run's pure helpers: the retry delay a Work Contract's ``retryPolicy`` asks for, capped by
its ``maxDelay``, and content-addressed checkpoints that are hash-checked on load."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from mwp.agent.execution import checkpoint_key, load_checkpoint, retry_delay, store_checkpoint
from mwp.core.wire.jcs import canonicalize
from mwp.stores.objects import FolderObjectStore

# --- retry_delay -------------------------------------------------------------------------------


def _policy(backoff: str | None, max_delay: str | None = "PT5M") -> dict[str, Any]:
    policy: dict[str, Any] = {"maxAttempts": 5, "retryableFailures": ["TRANSIENT"]}
    if backoff is not None:
        policy["backoff"] = backoff
    if max_delay is not None:
        policy["maxDelay"] = max_delay
    return policy


@pytest.mark.parametrize("attempt", [1, 2, 10, 50])
def test_no_backoff_retries_at_once(attempt: int) -> None:
    assert retry_delay(_policy("none"), attempt) == 0.0
    assert retry_delay(_policy(None), attempt) == 0.0  # "none" is the default


@pytest.mark.parametrize("attempt", [1, 2, 10, 50])
def test_fixed_backoff_waits_one_second_each_time(attempt: int) -> None:
    assert retry_delay(_policy("fixed"), attempt) == 1.0


def test_fixed_backoff_is_capped_by_a_shorter_max_delay() -> None:
    assert retry_delay(_policy("fixed", "PT0.5S"), 3) == 0.5


@pytest.mark.parametrize(("attempt", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0)])
def test_exponential_backoff_doubles_per_attempt(attempt: int, delay: float) -> None:
    assert retry_delay(_policy("exponential", "PT5M"), attempt) == delay


@pytest.mark.parametrize(
    ("max_delay", "attempt", "delay"),
    [
        ("PT5M", 10, 300.0),  # 512 s capped at five minutes
        ("PT5M", 40, 300.0),
        ("PT1.5S", 1, 1.0),
        ("PT1.5S", 2, 1.5),
        ("PT1.5S", 7, 1.5),
        ("PT2H", 13, 4096.0),
        ("PT2H", 14, 7200.0),
        ("P1D", 17, 65536.0),
        ("P1D", 18, 86400.0),
        ("P1DT2H3M4.5S", 30, 93784.5),
        ("PT0S", 3, 0.0),
    ],
)
def test_exponential_backoff_is_capped_by_max_delay(
    max_delay: str, attempt: int, delay: float
) -> None:
    assert retry_delay(_policy("exponential", max_delay), attempt) == delay


def test_a_missing_or_unreadable_max_delay_caps_at_five_minutes() -> None:
    assert retry_delay(_policy("exponential", None), 20) == 300.0
    assert retry_delay(_policy("exponential", "five minutes"), 20) == 300.0
    assert retry_delay(_policy("exponential", "P1W"), 20) == 300.0  # weeks are not read


def test_exponential_backoff_of_a_very_late_attempt_is_still_max_delay() -> None:
    assert retry_delay(_policy("exponential", "PT5M"), 1100) == 300.0


# --- store_checkpoint / load_checkpoint -------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> FolderObjectStore:
    return FolderObjectStore(tmp_path / "objects", fsync=False)


STATE: dict[str, Any] = {"cursor": 42, "done": ["a", "b"], "partial": {"rows": 3, "ok": True}}


def test_a_stored_checkpoint_loads_back_equal(store: FolderObjectStore) -> None:
    ref = store_checkpoint(store, STATE)

    assert ref == "sha256:" + hashlib.sha256(canonicalize(STATE)).hexdigest()
    assert store.get(checkpoint_key(ref)) == canonicalize(STATE)
    assert load_checkpoint(store, ref) == STATE


def test_the_same_state_gives_the_same_ref_and_a_different_state_another(
    store: FolderObjectStore,
) -> None:
    ref = store_checkpoint(store, STATE)
    reordered = dict(reversed(list(STATE.items())))

    assert store_checkpoint(store, reordered) == ref  # canonical JSON: key order is irrelevant
    other = store_checkpoint(store, {**STATE, "cursor": 43})
    assert other != ref
    assert load_checkpoint(store, other)["cursor"] == 43
    assert load_checkpoint(store, ref) == STATE


def test_an_absent_checkpoint_raises_lookup_error(store: FolderObjectStore) -> None:
    with pytest.raises(LookupError, match="not in the store"):
        load_checkpoint(store, "sha256:" + "0" * 64)


def test_an_altered_checkpoint_raises_lookup_error(store: FolderObjectStore) -> None:
    ref = store_checkpoint(store, STATE)
    path = store.root.joinpath(*checkpoint_key(ref).split("/"))
    assert path.is_file()
    path.chmod(0o644)
    path.write_bytes(canonicalize({**STATE, "cursor": 99}))

    with pytest.raises(LookupError, match="does not match its hash"):
        load_checkpoint(store, ref)


def test_a_checkpoint_stored_under_another_ref_is_not_served(store: FolderObjectStore) -> None:
    ref = store_checkpoint(store, STATE)
    other = "sha256:" + hashlib.sha256(b"something else").hexdigest()
    target = store.root.joinpath(*checkpoint_key(other).split("/"))
    target.write_bytes(store.get(checkpoint_key(ref)) or b"")

    with pytest.raises(LookupError):
        load_checkpoint(store, other)
