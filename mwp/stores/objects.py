"""Write-once object stores: a local folder (the embedded default) and S3 (boto3).

Both hold immutable objects under ``/``-separated keys and share one contract, so the Group
Event log and the Artifact store run unchanged on either:

* ``put_if_absent(key, data)`` writes an object at most once. It returns True when it created
  the object, False when the same bytes are already there (an idempotent retry), and raises
  :class:`ObjectConflict` when different bytes are, which are then left untouched.
* ``put_many_if_absent(items)`` is ``put_if_absent`` for each ``(key, data)`` in order, as one
  durable batch (see :meth:`FolderObjectStore.put_many_if_absent`).
* ``put_stream_if_absent`` does the same for a body given as chunks, without holding it in
  memory (multipart on S3), and refuses to commit it if its SHA-256 is not the expected one.
* ``get`` / ``open_stream`` read an object, None when it is absent.
* ``list_keys(prefix, after=..., limit=...)`` pages through keys in lexical order.

Keys are relative, made of segments of ``A-Z a-z 0-9 . _ - ~ %``, none empty, none starting
with a dot; so no key escapes the folder and the folder's own temporary files never show.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

CHUNK_SIZE = 1024 * 1024
# S3 parts are at least 5 MiB except the last; 8 MiB keeps a 10,000-part upload near 80 GiB.
PART_SIZE = 8 * 1024 * 1024
_SEGMENT = re.compile(r"[A-Za-z0-9_~%-][A-Za-z0-9._~%-]*")
_TMP_DIR = ".tmp"


class ObjectStoreError(RuntimeError):
    """The store could not do what was asked (unreachable, refused, misconfigured)."""


class ObjectConflict(ObjectStoreError):  # noqa: N818 (a conflict, not a crash)
    """Different bytes already exist under ``key``; nothing was overwritten.

    From a batch write, ``written`` holds the results of the items before the refused one
    (stored and durable, as if put one by one); the items after it were not written.
    """

    def __init__(self, key: str, written: Sequence[bool] = ()) -> None:
        super().__init__(f"a different object already exists under {key!r}")
        self.key = key
        self.written = tuple(written)


class DigestMismatch(ObjectStoreError):  # noqa: N818
    """A streamed body did not have the expected SHA-256; nothing was committed."""

    def __init__(self, key: str, expected: str, actual: str) -> None:
        super().__init__(f"{key!r}: expected {expected}, the body is {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


def check_key(key: str) -> str:
    if not key or any(not _SEGMENT.fullmatch(part) for part in key.split("/")):
        raise ValueError(f"invalid object key {key!r}")
    return key


def _check_prefix(prefix: str) -> str:
    # A prefix is a key, or a key followed by "/", or empty (everything).
    if prefix:
        check_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


def _check_folder_prefix(prefix: str) -> str:
    if not prefix.endswith("/"):
        raise ValueError(f"a folder prefix ends with '/': {prefix!r}")
    return _check_prefix(prefix)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@runtime_checkable
class ObjectStore(Protocol):
    """The write-once contract of the module docstring."""

    def put_if_absent(self, key: str, data: bytes) -> bool: ...

    def put_many_if_absent(self, items: Sequence[tuple[str, bytes]]) -> list[bool]:
        """``put_if_absent`` of each item in order, one result each; when it returns, every
        item is stored and durable. A conflict raises :class:`ObjectConflict` at the first
        refused item, with the items before it written and nothing after it."""
        ...

    def put_stream_if_absent(
        self, key: str, chunks: Iterable[bytes], *, expect_sha256: str | None = None
    ) -> bool: ...

    def get(self, key: str) -> bytes | None: ...

    def open_stream(self, key: str) -> Iterator[bytes] | None: ...

    def exists(self, key: str) -> bool: ...

    def list_keys(self, prefix: str, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Keys under ``prefix`` greater than ``after``, in lexical order, at most ``limit``."""
        ...

    def list_folders(self, prefix: str) -> list[str]:
        """The names of the next key segments under ``prefix`` (which ends with ``/``), sorted:
        ``groups/`` lists one name per Group without listing its Events."""
        ...

    def uri(self, key: str) -> str:
        """Where the object can be retrieved (not its identity: that is its content hash)."""
        ...


def iter_keys(
    store: ObjectStore, prefix: str, *, after: str | None = None, page_size: int = 1000
) -> Iterator[str]:
    """Every key under ``prefix`` after ``after``, page by page."""
    while True:
        page = store.list_keys(prefix, after=after, limit=page_size)
        if not page:
            return
        yield from page
        after = page[-1]


def _stream_digest(chunks: Iterator[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def _same_stream(store: ObjectStore, key: str, digest: str) -> bool:
    existing = store.open_stream(key)
    return existing is not None and _stream_digest(existing) == digest


# --- a local folder -------------------------------------------------------------------------


class FolderObjectStore:
    """Objects as files under ``root`` (one file per key), written once.

    A body is written to a temporary file in ``root/.tmp``, flushed to disk, then hard-linked
    to its final name: ``link`` fails if the name exists, so two writers cannot both create an
    object and a reader never sees a partial file. With ``fsync`` (the default) the file and
    its folder are synced before ``put`` returns, so an acknowledged object survives a crash.
    """

    def __init__(self, root: Path | str, *, fsync: bool = True) -> None:
        self.root = Path(root).resolve()
        self.fsync = fsync
        self._tmp = self.root / _TMP_DIR  # created by the first write: reading creates nothing

    def __repr__(self) -> str:
        return f"FolderObjectStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        existing = _read(path)
        if existing is not None:  # an idempotent retry costs one read, no temporary file
            return _settle(key, existing == data)
        return self._write(path, key, [data], lambda: self.get(key) == data)

    def put_many_if_absent(self, items: Sequence[tuple[str, bytes]]) -> list[bool]:
        """Write each absent item once, in order: one file fsync per item and one fsync per
        folder touched, instead of a folder fsync per item.

        Every body is written to its temporary file and fsynced first; then the files are linked
        into place in item order; then each folder that gained a name is fsynced once. So a
        reader sees the items appear in order, each complete, and when the call returns all of
        them are durable. A refused item (different bytes stored, found before or at its link)
        stops the batch there: the items before it are linked and synced, none after it is
        linked, and :class:`ObjectConflict` carries their results.

        What a crash can leave, and why a retry of the same batch repairs it: a process crash
        leaves every linked item whole and visible (links are atomic; bodies were complete
        before their link), so the stored items are a prefix of the batch. A machine crash
        before the folder fsync may lose any of this batch's links, even one before a kept
        one, though every surviving name holds its whole fsynced body; a reader may have seen
        an item that is then gone. Neither completed the call, so the caller retries it (the
        mirror activity is retried with the same batch, which the MissionWorkflow keeps until
        it completes): stored items with equal bytes are kept, missing ones are written again.
        For the Group Event log the bytes written again are the same as those a reader saw:
        sealing is deterministic (JCS of the Event with its chain link, the signature time
        copied from the Event, and Ed25519, whose RFC 8032 signatures have no randomness), so
        the same Event, link and Group Authority key give the same entry. (Only a key replaced
        between the crash and the retry gives other bytes; the keyring never replaces one.)
        """
        paths = [self._path(key) for key, _ in items]  # every key checked before any write
        results: list[bool] = []
        staged: list[tuple[int, Path]] = []  # (item, temporary file), in item order
        refused: int | None = None
        try:
            for index, ((_, data), path) in enumerate(zip(items, paths, strict=True)):
                existing = _read(path)
                if existing is not None:  # an idempotent retry: one read, no temporary file
                    if existing != data:
                        refused = index
                        break
                    results.append(False)
                    continue
                staged.append((index, self._staged(data)))
                results.append(True)
            folders: dict[Path, None] = {}  # the folders to sync, in first-touched order
            for index, tmp in staged:
                path = paths[index]
                if path.parent not in folders:
                    folders.update(dict.fromkeys(_ensure_folder(path.parent)))
                try:
                    os.link(tmp, path)  # atomic, and refuses an existing name
                except FileExistsError:  # a concurrent writer, or a key twice in the batch
                    if _read(path) != items[index][1]:
                        refused = index
                        break
                    results[index] = False
                    continue
                folders[path.parent] = None
            if self.fsync:
                for folder in folders:
                    _sync_dir(folder)
        finally:
            for _, tmp in staged:
                tmp.unlink(missing_ok=True)
        if refused is not None:
            raise ObjectConflict(items[refused][0], results[:refused])
        return results

    def _staged(self, data: bytes) -> Path:
        """``data`` in a new temporary file, fsynced."""
        try:
            fd, tmp_name = tempfile.mkstemp(dir=self._tmp)
        except FileNotFoundError:
            self._tmp.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=self._tmp)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if self.fsync:
                    os.fsync(handle.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    def put_stream_if_absent(
        self, key: str, chunks: Iterable[bytes], *, expect_sha256: str | None = None
    ) -> bool:
        digest = hashlib.sha256()

        def hashed() -> Iterator[bytes]:
            for chunk in chunks:
                digest.update(chunk)
                yield chunk

        def check() -> None:
            actual = digest.hexdigest()
            if expect_sha256 is not None and actual != expect_sha256:
                raise DigestMismatch(key, expect_sha256, actual)

        return self._write(
            self._path(key),
            key,
            hashed(),
            lambda: _same_stream(self, key, digest.hexdigest()),
            before_link=check,
        )

    def _write(
        self,
        path: Path,
        key: str,
        chunks: Iterable[bytes],
        same: Callable[[], bool],
        *,
        before_link: Callable[[], None] | None = None,
    ) -> bool:
        try:
            fd, tmp_name = tempfile.mkstemp(dir=self._tmp)
        except FileNotFoundError:
            self._tmp.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=self._tmp)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                if self.fsync:
                    os.fsync(handle.fileno())
            if before_link is not None:
                before_link()
            created = _ensure_folder(path.parent)
            try:
                os.link(tmp, path)  # atomic, and refuses an existing name
            except FileExistsError:
                return _settle(key, same())
            if self.fsync:
                for folder in [*created, path.parent]:
                    _sync_dir(folder)
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def get(self, key: str) -> bytes | None:
        return _read(self._path(key))

    def open_stream(self, key: str) -> Iterator[bytes] | None:
        try:
            handle = self._path(key).open("rb")
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _file_chunks(handle)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list_keys(self, prefix: str, *, after: str | None = None, limit: int = 1000) -> list[str]:
        _check_prefix(prefix)
        # Walk only the deepest folder the prefix names; keys are its files' relative paths.
        folder_part, _, _ = prefix.rpartition("/")
        base = self.root.joinpath(*folder_part.split("/")) if folder_part else self.root
        keys: list[str] = []
        for folder, dirs, files in os.walk(base):
            relative = Path(folder).relative_to(self.root).as_posix()
            stem = "" if relative == "." else relative + "/"
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            keys.extend(
                stem + name
                for name in files
                if not name.startswith(".") and (stem + name).startswith(prefix)
            )
        keys.sort()
        if after is not None:
            keys = [k for k in keys if k > after]
        return keys[:limit]

    def list_folders(self, prefix: str) -> list[str]:
        _check_folder_prefix(prefix)
        base = self.root.joinpath(*prefix.rstrip("/").split("/"))
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))

    def uri(self, key: str) -> str:
        return self._path(key).as_uri()


def _ensure_folder(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the folders that gained a folder's name
    (whose fsync makes the new folders durable), outermost first."""
    missing: list[Path] = []
    probe = folder
    while not probe.is_dir():
        missing.append(probe)
        probe = probe.parent
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
    return [created.parent for created in reversed(missing)]


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _file_chunks(handle: Any) -> Iterator[bytes]:
    with handle:
        while chunk := handle.read(CHUNK_SIZE):
            yield chunk


def _settle(key: str, same: bool) -> bool:
    if not same:
        raise ObjectConflict(key)
    return False


# --- S3 -------------------------------------------------------------------------------------


class S3ObjectStore:
    """Objects in an S3 bucket under an optional key prefix, written once.

    Writes are conditional (``If-None-Match: *``, on ``PutObject`` and on
    ``CompleteMultipartUpload``): the server refuses to replace an existing object, so two
    writers cannot both create one. SeaweedFS, MinIO and AWS S3 honour it (the integration
    tests check SeaweedFS, including concurrent writers). For a server that does not,
    ``conditional_writes=False`` falls back to check-then-put followed by a read-back: an
    idempotent retry and a sequential conflict are still detected, but two concurrent writers
    of different bodies are not prevented (last writer wins, the loser sees a conflict).
    """

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        prefix: str = "",
        *,
        conditional_writes: bool = True,
        part_size: int = PART_SIZE,
    ) -> None:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        _check_prefix(prefix)
        if part_size < 5 * 1024 * 1024:
            raise ValueError("S3 parts are at least 5 MiB")
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.conditional_writes = conditional_writes
        self.part_size = part_size

    def __repr__(self) -> str:
        return f"S3ObjectStore(s3://{self.bucket}/{self.prefix})"

    @classmethod
    def connect(
        cls,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str | None = None,
        **options: Any,
    ) -> S3ObjectStore:
        """A store on a new client (see :func:`s3_client`)."""
        client = s3_client(endpoint_url, access_key, secret_key, region)
        return cls(client, bucket, prefix, **options)

    def ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _status(exc) != 404:
                raise ObjectStoreError(f"bucket {self.bucket}: {exc}") from exc
            try:
                self.client.create_bucket(Bucket=self.bucket)
            except self.client.exceptions.BucketAlreadyOwnedByYou:
                pass  # created concurrently
            except ClientError as created:
                raise ObjectStoreError(f"bucket {self.bucket}: {created}") from created

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    # --- writing ---

    def put_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        full = self._key(key)
        if not self.conditional_writes:
            return self._put_checked(key, full, data)
        for _ in range(5):
            try:
                self.client.put_object(Bucket=self.bucket, Key=full, Body=data, IfNoneMatch="*")
                return True
            except ClientError as exc:
                status = _status(exc)
                if status == 412:  # something is there: the same bytes, or a conflict
                    existing = self.get(key)
                    if existing is not None:
                        return _settle(key, existing == data)
                elif status != 409:  # 409: a concurrent conditional write; try again
                    raise ObjectStoreError(f"put {full}: {exc}") from exc
            time.sleep(0.05)
        raise ObjectStoreError(f"put {full}: conditional write kept conflicting")

    def _put_checked(self, key: str, full: str, data: bytes) -> bool:
        """Without conditional writes: check, put, read back (see the class docstring)."""
        existing = self.get(key)
        if existing is not None:
            return _settle(key, existing == data)
        self.client.put_object(Bucket=self.bucket, Key=full, Body=data)
        if self.get(key) != data:  # a concurrent writer replaced it
            raise ObjectConflict(key)
        return True

    def put_many_if_absent(self, items: Sequence[tuple[str, bytes]]) -> list[bool]:
        """One conditional PUT after another, in item order: S3 has no multi-object write,
        and each PUT is durable when it returns, so the stored items are always a prefix of
        the batch and a retry completes it (see :meth:`FolderObjectStore.put_many_if_absent`).
        """
        for key, _ in items:
            check_key(key)
        results: list[bool] = []
        for key, data in items:
            try:
                results.append(self.put_if_absent(key, data))
            except ObjectConflict:
                raise ObjectConflict(key, results) from None
        return results

    def put_stream_if_absent(
        self, key: str, chunks: Iterable[bytes], *, expect_sha256: str | None = None
    ) -> bool:
        full = self._key(key)
        if self.exists(key) and expect_sha256 is not None:
            # Content-addressed: nothing to upload if the stored body has the expected hash.
            return _settle(key, _same_stream(self, key, expect_sha256))
        parts = _parts(chunks, self.part_size)
        first = next(parts, b"")
        second = next(parts, None)
        if second is None:  # small enough for one request
            actual = sha256_hex(first)
            if expect_sha256 is not None and actual != expect_sha256:
                raise DigestMismatch(key, expect_sha256, actual)
            return self.put_if_absent(key, first)
        return self._multipart(key, full, first, second, parts, expect_sha256)

    def _multipart(
        self,
        key: str,
        full: str,
        first: bytes,
        second: bytes,
        rest: Iterator[bytes],
        expect_sha256: str | None,
    ) -> bool:
        from botocore.exceptions import ClientError

        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=full)["UploadId"]
        digest = hashlib.sha256()
        completed = False
        try:
            uploaded = []
            for number, body in enumerate(_chain(first, second, rest), start=1):
                digest.update(body)
                etag = self.client.upload_part(
                    Bucket=self.bucket, Key=full, UploadId=upload_id, PartNumber=number, Body=body
                )["ETag"]
                uploaded.append({"ETag": etag, "PartNumber": number})
            actual = digest.hexdigest()
            if expect_sha256 is not None and actual != expect_sha256:
                raise DigestMismatch(key, expect_sha256, actual)
            if not self.conditional_writes and self.exists(key):
                return _settle(key, _same_stream(self, key, actual))
            condition: dict[str, Any] = {"IfNoneMatch": "*"} if self.conditional_writes else {}
            try:
                self.client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=full,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": uploaded},  # type: ignore[typeddict-item]
                    **condition,
                )
            except ClientError as exc:
                if _status(exc) != 412:
                    raise ObjectStoreError(f"complete {full}: {exc}") from exc
                return _settle(key, _same_stream(self, key, actual))
            completed = True
            return True
        finally:
            if not completed:
                with contextlib.suppress(Exception):
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=full, UploadId=upload_id
                    )

    # --- reading ---

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        full = self._key(key)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=full)
        except ClientError as exc:
            if _status(exc) == 404:
                return None
            raise ObjectStoreError(f"get {full}: {exc}") from exc
        return response["Body"].read()

    def open_stream(self, key: str) -> Iterator[bytes] | None:
        from botocore.exceptions import ClientError

        full = self._key(key)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=full)
        except ClientError as exc:
            if _status(exc) == 404:
                return None
            raise ObjectStoreError(f"get {full}: {exc}") from exc
        body = response["Body"]

        def chunks() -> Iterator[bytes]:
            with contextlib.closing(body):
                yield from body.iter_chunks(CHUNK_SIZE)

        return chunks()

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        full = self._key(key)
        try:
            self.client.head_object(Bucket=self.bucket, Key=full)
        except ClientError as exc:
            if _status(exc) == 404:
                return False
            raise ObjectStoreError(f"head {full}: {exc}") from exc
        return True

    def list_keys(self, prefix: str, *, after: str | None = None, limit: int = 1000) -> list[str]:
        from botocore.exceptions import ClientError

        _check_prefix(prefix)
        request: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": max(1, min(limit, 1000)),
        }
        if after is not None:
            request["StartAfter"] = self.prefix + after
        try:
            response = self.client.list_objects_v2(**request)
        except ClientError as exc:
            raise ObjectStoreError(f"list {self.prefix + prefix}: {exc}") from exc
        cut = len(self.prefix)
        return [item["Key"][cut:] for item in response.get("Contents", [])][:limit]

    def list_folders(self, prefix: str) -> list[str]:
        from botocore.exceptions import ClientError

        _check_folder_prefix(prefix)
        names: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        full = self.prefix + prefix
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full, Delimiter="/"):
                names.extend(
                    p["Prefix"][len(full) :].rstrip("/") for p in page.get("CommonPrefixes", [])
                )
        except ClientError as exc:
            raise ObjectStoreError(f"list {full}: {exc}") from exc
        return sorted(names)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"


def s3_client(
    endpoint_url: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    region: str | None = None,
) -> S3Client:
    """A boto3 S3 client, path-style (what local servers expect), with standard retries.

    Unset credentials come from the usual AWS chain (environment, profile, instance role).
    """
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region or os.environ.get("AWS_REGION") or "us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "max_attempts": 5},
            max_pool_connections=32,
        ),
    )


def _status(exc: Any) -> int:
    status: int = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    if status == 0 and exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
        return 404
    return status


def _parts(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """Re-cut a stream into parts of exactly ``size`` bytes (the last may be shorter)."""
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= size:
            yield bytes(buffer[:size])
            del buffer[:size]
    if buffer:
        yield bytes(buffer)


def _chain(first: bytes, second: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield second
    yield from rest


# --- choosing a store -----------------------------------------------------------------------


def open_store(location: str | Path, *, fsync: bool = True) -> ObjectStore:
    """``s3://bucket[/prefix]`` or a folder path.

    For S3 the endpoint comes from ``MWP_S3_ENDPOINT`` (else ``AWS_ENDPOINT_URL``, else AWS)
    and credentials from the usual AWS environment (``AWS_ACCESS_KEY_ID``, ...).
    """
    text = str(location)
    if text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://") :].partition("/")
        if not bucket:
            raise ValueError(f"no bucket in {text!r}")
        endpoint = os.environ.get("MWP_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
        return S3ObjectStore.connect(bucket, prefix.strip("/"), endpoint_url=endpoint)
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", text)
    return FolderObjectStore(path, fsync=fsync)
