"""The write-once object store contract, on a local folder and on a real SeaweedFS server."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from pathlib import Path

import pytest

from mwp.dev.seaweed import SeaweedS3Server
from mwp.stores.objects import (
    DigestMismatch,
    FolderObjectStore,
    ObjectConflict,
    ObjectStore,
    ObjectStoreError,
    S3ObjectStore,
    iter_keys,
    open_store,
)
from tests.integration.s3_fixture import TEST_BUCKET

MIB = 1024 * 1024


def test_put_is_write_once(object_store: ObjectStore) -> None:
    assert object_store.put_if_absent("a/one.json", b"first") is True
    assert object_store.get("a/one.json") == b"first"
    assert object_store.exists("a/one.json")
    assert object_store.put_if_absent("a/one.json", b"first") is False  # idempotent retry
    with pytest.raises(ObjectConflict) as raised:
        object_store.put_if_absent("a/one.json", b"second")
    assert raised.value.key == "a/one.json"
    assert object_store.get("a/one.json") == b"first"


def test_a_batch_is_written_once_in_order(object_store: ObjectStore) -> None:
    object_store.put_if_absent("b/2", b"two")
    items = [("b/1", b"one"), ("b/2", b"two"), ("b/3", b"three")]
    assert object_store.put_many_if_absent(items) == [True, False, True]
    assert object_store.put_many_if_absent(items) == [False, False, False]  # a retry
    assert [object_store.get(key) for key, _ in items] == [b"one", b"two", b"three"]
    with pytest.raises(ObjectConflict) as raised:
        object_store.put_many_if_absent([("c/1", b"x"), ("b/3", b"other"), ("c/2", b"y")])
    assert (raised.value.key, raised.value.written) == ("b/3", (True,))
    assert object_store.get("b/3") == b"three" and object_store.get("c/1") == b"x"
    assert not object_store.exists("c/2")  # nothing after the refused item
    with pytest.raises(ValueError):
        object_store.put_many_if_absent([("d/1", b"x"), ("d//2", b"y")])
    assert not object_store.exists("d/1")  # a bad key anywhere: nothing written


def test_absent_objects_read_as_none(object_store: ObjectStore) -> None:
    assert object_store.get("a/missing") is None
    assert object_store.open_stream("a/missing") is None
    assert not object_store.exists("a/missing")
    object_store.put_if_absent("a/file", b"x")
    assert object_store.get("a/file/below") is None  # a key under an object's name


def test_empty_bodies_are_objects(object_store: ObjectStore) -> None:
    assert object_store.put_if_absent("e/empty", b"") is True
    assert object_store.get("e/empty") == b""
    assert object_store.put_if_absent("e/empty", b"") is False
    with pytest.raises(ObjectConflict):
        object_store.put_if_absent("e/empty", b"not empty")


def test_listing_is_lexical_under_the_prefix_and_pages(object_store: ObjectStore) -> None:
    for key in ["g/b/2", "g/b/10", "g/b/1", "g/bc/1", "g/a", "h/x"]:
        object_store.put_if_absent(key, key.encode())
    assert object_store.list_keys("g/b/") == ["g/b/1", "g/b/10", "g/b/2"]
    assert object_store.list_keys("g/b") == ["g/b/1", "g/b/10", "g/b/2", "g/bc/1"]
    assert object_store.list_keys("g/", after="g/b/10") == ["g/b/2", "g/bc/1"]
    assert object_store.list_keys("g/", limit=2) == ["g/a", "g/b/1"]
    assert object_store.list_keys("nothing/") == []
    assert list(iter_keys(object_store, "g/", page_size=2)) == [
        "g/a",
        "g/b/1",
        "g/b/10",
        "g/b/2",
        "g/bc/1",
    ]
    assert list(iter_keys(object_store, "g/", after="g/b/1", page_size=1)) == [
        "g/b/10",
        "g/b/2",
        "g/bc/1",
    ]


@pytest.mark.parametrize("key", ["", "/a", "a/", "a//b", "../a", "a/../b", ".tmp/x", "a b", "é"])
def test_keys_that_could_escape_or_collide_are_refused(object_store: ObjectStore, key: str) -> None:
    with pytest.raises(ValueError):
        object_store.put_if_absent(key, b"x")
    with pytest.raises(ValueError):
        object_store.get(key)


def test_percent_escaped_segments_are_plain_keys(object_store: ObjectStore) -> None:
    key = "groups/urn%3Amwp%3Agroup%3Aa/events/000000000001.json"
    assert object_store.put_if_absent(key, b"{}")
    assert object_store.list_keys("groups/") == [key]
    assert object_store.get(key) == b"{}"
    assert object_store.get("groups/urn%3amwp%3agroup%3aa/events/000000000001.json") is None


def test_streamed_bodies_are_stored_whole_and_checked(object_store: ObjectStore) -> None:
    chunks = [bytes([n]) * MIB for n in range(11)]  # 11 MiB: several S3 parts
    body = b"".join(chunks)
    digest = hashlib.sha256(body).hexdigest()
    assert object_store.put_stream_if_absent("s/big", iter(chunks), expect_sha256=digest)
    stream = object_store.open_stream("s/big")
    assert stream is not None
    assert hashlib.sha256(b"".join(stream)).hexdigest() == digest
    assert object_store.put_stream_if_absent("s/big", iter(chunks)) is False
    assert object_store.put_stream_if_absent("s/big", iter(chunks), expect_sha256=digest) is False
    with pytest.raises(ObjectConflict):
        object_store.put_stream_if_absent("s/big", iter([b"other"]))


def test_a_streamed_body_with_another_hash_is_not_committed(object_store: ObjectStore) -> None:
    for name, chunks in [("small", [b"abc", b"def"]), ("large", [b"x" * MIB] * 9)]:
        with pytest.raises(DigestMismatch):
            object_store.put_stream_if_absent(f"s/{name}", iter(chunks), expect_sha256="0" * 64)
        assert not object_store.exists(f"s/{name}")
        assert object_store.list_keys("s/") == []


def test_small_streams_are_one_object(object_store: ObjectStore) -> None:
    assert object_store.put_stream_if_absent("s/small", iter([b"ab", b"", b"c"]))
    assert object_store.get("s/small") == b"abc"


def test_concurrent_writers_of_one_key_have_one_winner(object_store: ObjectStore) -> None:
    for round_ in range(5):
        key = f"race/{round_}"
        outcomes: dict[int, object] = {}
        barrier = threading.Barrier(8)

        def write(
            writer: int,
            key: str = key,
            outcomes: dict[int, object] = outcomes,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            try:
                outcomes[writer] = object_store.put_if_absent(key, f"writer {writer}".encode())
            except ObjectConflict as exc:
                outcomes[writer] = exc

        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [n for n, outcome in outcomes.items() if outcome is True]
        assert len(winners) == 1, outcomes
        assert all(isinstance(o, ObjectConflict) for n, o in outcomes.items() if n != winners[0])
        assert object_store.get(key) == f"writer {winners[0]}".encode()


def test_uris_name_the_object(object_store: ObjectStore) -> None:
    uri = object_store.uri("a/b")
    if isinstance(object_store, FolderObjectStore):
        assert uri == (object_store.root / "a" / "b").as_uri()
    else:
        assert isinstance(object_store, S3ObjectStore)
        assert uri == f"s3://{TEST_BUCKET}/{object_store.prefix}a/b"


# --- one backend ----------------------------------------------------------------------------


def test_folder_temporary_files_never_show(tmp_path: Path) -> None:
    store = FolderObjectStore(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "half-written").write_bytes(b"partial")
    store.put_if_absent("k/v", b"x")
    assert store.list_keys("") == ["k/v"]
    assert list((tmp_path / ".tmp").iterdir()) == [tmp_path / ".tmp" / "half-written"]


def test_reading_a_folder_store_creates_nothing(tmp_path: Path) -> None:
    store = FolderObjectStore(tmp_path / "absent")
    assert store.get("a/b") is None and store.list_keys("") == [] and not store.exists("a")
    assert not (tmp_path / "absent").exists()
    store.put_if_absent("a/b", b"x")
    assert store.get("a/b") == b"x"


def test_s3_without_conditional_writes_still_refuses_a_second_body(
    seaweed: SeaweedS3Server,
) -> None:
    store = S3ObjectStore(
        seaweed.client(), TEST_BUCKET, f"t-{uuid.uuid4().hex[:12]}", conditional_writes=False
    )
    assert store.put_if_absent("a", b"one") is True
    assert store.put_if_absent("a", b"one") is False
    with pytest.raises(ObjectConflict):
        store.put_if_absent("a", b"two")
    body = [b"y" * MIB] * 6
    assert store.put_stream_if_absent("big", iter(body)) is True
    assert store.put_stream_if_absent("big", iter(body)) is False
    assert store.get("a") == b"one"


def test_an_unusable_bucket_is_a_store_error(seaweed: SeaweedS3Server) -> None:
    with pytest.raises(ObjectStoreError, match="bucket x"):
        seaweed.object_store("x")  # too short for a bucket name


def test_the_server_itself_refuses_to_replace_an_object(seaweed: SeaweedS3Server) -> None:
    """What the conditional writes rest on: If-None-Match on PUT and on multipart completion."""
    from botocore.exceptions import ClientError

    client = seaweed.client()
    key = f"t-{uuid.uuid4().hex[:12]}/x"
    client.put_object(Bucket=TEST_BUCKET, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as raised:
        client.put_object(Bucket=TEST_BUCKET, Key=key, Body=b"2", IfNoneMatch="*")
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    upload = client.create_multipart_upload(Bucket=TEST_BUCKET, Key=key)["UploadId"]
    part = client.upload_part(Bucket=TEST_BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"3")
    with pytest.raises(ClientError) as raised:
        client.complete_multipart_upload(
            Bucket=TEST_BUCKET,
            Key=key,
            UploadId=upload,
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
            IfNoneMatch="*",
        )
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    client.abort_multipart_upload(Bucket=TEST_BUCKET, Key=key, UploadId=upload)
    assert client.get_object(Bucket=TEST_BUCKET, Key=key)["Body"].read() == b"1"


def test_open_store_reaches_both_backends(
    seaweed: SeaweedS3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = open_store(tmp_path / "f")
    assert isinstance(folder, FolderObjectStore)
    for name, value in seaweed.environment().items():
        monkeypatch.setenv(name, value)
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    remote = open_store(f"s3://{TEST_BUCKET}/{prefix}/")
    assert isinstance(remote, S3ObjectStore)
    assert remote.prefix == prefix + "/"
    remote.put_if_absent("k", b"v")
    assert seaweed.client().get_object(Bucket=TEST_BUCKET, Key=f"{prefix}/k")["Body"].read() == b"v"
    with pytest.raises(ValueError):
        open_store("s3:///no-bucket")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        open_store(tmp_path / "file")


def test_the_server_stops_by_pid_and_its_folder_goes(tmp_path: Path) -> None:
    server = SeaweedS3Server().start()
    pid, folder = server.pid, server.data_dir
    assert pid is not None and folder is not None and folder.is_dir()
    store = server.object_store("stop-test")
    store.put_if_absent("k", b"v")
    ports = dict(server.ports)
    assert ports["s3.port"] == server.s3_port and len(set(ports.values())) == len(ports)
    assert server.stop() in ("terminated", "killed")
    assert not folder.exists()
    assert not [
        p
        for p in Path("/tmp").glob("seaweedfs-*.sock")
        if p.stem.endswith(tuple(f"-{port}" for port in ports.values()))
    ]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
