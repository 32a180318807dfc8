"""Deleting objects, which the write-once :class:`~mwp.stores.objects.ObjectStore` contract
leaves out on purpose: only log compaction (after the entries are safely archived) and cursor
housekeeping remove anything, and they do it through here.

A store may offer its own ``delete(key) -> bool``; otherwise the two stores of this project are
handled directly (a file unlinked and its folder synced; an S3 ``DeleteObject``).
"""

from __future__ import annotations

import os

from mwp.stores.objects import (
    FolderObjectStore,
    ObjectStore,
    ObjectStoreError,
    S3ObjectStore,
    check_key,
)


def delete_object(store: ObjectStore, key: str) -> bool:
    """Remove the object under ``key``; True if it was there. Absent is not an error."""
    own = getattr(store, "delete", None)
    if callable(own):
        return bool(own(key))
    if isinstance(store, FolderObjectStore):
        path = store.root.joinpath(*check_key(key).split("/"))
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return False
        if store.fsync:
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return True
    if isinstance(store, S3ObjectStore):
        from botocore.exceptions import ClientError

        full = store.prefix + check_key(key)
        try:
            existed = store.exists(key)
            store.client.delete_object(Bucket=store.bucket, Key=full)
        except ClientError as exc:
            raise ObjectStoreError(f"delete {full}: {exc}") from exc
        return existed
    raise ObjectStoreError(f"{store!r} cannot delete objects")
