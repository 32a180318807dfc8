"""Key files appear whole or not at all: processes that race to create the same key (`mwp dev`
and `mwp registry init` both make sure the Group Authority key exists) see either no file or
a complete one, and exactly one creation wins."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mwp.client import ClientError, Identity, KeyStore
from mwp.core.trust.registry import Principal

PRINCIPAL = Principal("service", "urn:mwp:service:group-authority")


def test_racing_creators_make_one_key_and_readers_never_see_half_of_it(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys")
    won: list[Identity] = []
    seen: list[Identity] = []
    problems: list[BaseException] = []
    start = threading.Barrier(16)

    def create() -> None:
        identity = Identity.generate(PRINCIPAL)
        start.wait()
        try:
            keys.save("authority", identity)
            won.append(identity)
        except ClientError:
            pass  # another creator won
        except BaseException as error:
            problems.append(error)

    def read() -> None:
        start.wait()
        for _ in range(200):
            try:
                seen.append(keys.load("authority"))
            except ClientError:
                continue  # not there yet
            except BaseException as error:  # a half-written file: JSONDecodeError, KeyError
                problems.append(error)

    threads = [threading.Thread(target=create) for _ in range(8)]
    threads += [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    [winner] = won
    assert all(identity.key_id == winner.key_id for identity in seen)
    assert keys.names() == ["authority"]  # nothing left aside


def test_overwrite_replaces_the_key_whole(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path)
    keys.save("k", Identity.generate(PRINCIPAL))
    second = Identity.generate(PRINCIPAL)
    with pytest.raises(ClientError, match="already exists"):
        keys.save("k", second)
    keys.save("k", second, overwrite=True)
    assert keys.load("k").key_id == second.key_id
    assert (tmp_path / "k.json").stat().st_mode & 0o777 == 0o600
