"""A durable Admission Log in one SQLite file (spec 6.4), behind :class:`AdmissionLog`.

Properties the protocol asks of the log, and how this file provides them:

- *Authenticated caller.* Every operation presents a :class:`ServiceCredential`; the log
  compares a digest of its secret with the one provisioned for that service in that
  Organization. Unknown services and wrong secrets get ``UNAUTHENTICATED``.
- *Authorized writes.* Only services provisioned with ``may_append`` can append, and only
  records whose ``acceptedBy`` is the authenticated service itself.
- *Append-only integrity.* Triggers refuse UPDATE and DELETE; every entry carries a SHA-256
  hash chained to its predecessor and is re-checked, with its key columns, on every read.
  The chain is unkeyed: it detects accidental corruption and naive edits, not an attacker
  who can rewrite the whole file (protect the file itself for that).
- *One atomic append-or-return-existing per (organizationId, signingHash).* The decision and
  the insert run inside one ``BEGIN IMMEDIATE`` transaction, which SQLite serializes across
  threads and processes; UNIQUE constraints back up both the logical key and the
  ``admissionRecordId``.

Each operation opens its own connection, so one instance may be shared by threads and the
file by processes. Every outcome is a typed result; nothing raises to the caller.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mwp.core.trust.admission import (
    AdmissionError,
    AppendCommitted,
    AppendResult,
    FirstAdmissionRecord,
    HeldRecord,
    LogFailed,
    LogFailure,
    LookupAbsent,
    LookupFound,
    LookupResult,
    decide_append,
    parse_record,
)
from mwp.core.trust.registry import Principal
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import b64url_encode, is_identifier

CLAUSES: tuple[str, ...] = ("MWP-ADM-003", "MWP-ADM-004")

SCHEMA_VERSION = "1"
GENESIS = "sha256:" + "0" * 64
_MIN_SECRET_BYTES = 16

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS services (
    organization_id TEXT NOT NULL,
    service_id TEXT NOT NULL,
    secret_digest BLOB NOT NULL,
    may_append INTEGER NOT NULL CHECK (may_append IN (0, 1)),
    PRIMARY KEY (organization_id, service_id)
);
CREATE TABLE IF NOT EXISTS admission_records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    organization_id TEXT NOT NULL,
    signing_hash TEXT NOT NULL,
    admission_record_id TEXT NOT NULL UNIQUE,
    record BLOB NOT NULL,
    writer_id TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    entry_hash TEXT NOT NULL,
    UNIQUE (organization_id, signing_hash)
);
CREATE TRIGGER IF NOT EXISTS admission_records_no_update
    BEFORE UPDATE ON admission_records
    BEGIN SELECT RAISE(ABORT, 'the admission log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS admission_records_no_delete
    BEFORE DELETE ON admission_records
    BEGIN SELECT RAISE(ABORT, 'the admission log is append-only'); END;
"""


@dataclass(frozen=True)
class ServiceCredential:
    """What a calling service presents: its identity, Organization and a shared secret."""

    organization_id: str
    service: Principal
    secret: bytes

    def __repr__(self) -> str:  # keep the secret out of logs and tracebacks
        return f"ServiceCredential({self.organization_id!r}, {self.service!r}, secret=<hidden>)"


class _LogFailureError(Exception):
    """Internal: unwinds an operation to a typed failure."""

    def __init__(self, failure: LogFailure, detail: str) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail


def _secret_digest(secret: bytes) -> bytes:
    # Secrets are random and high-entropy, so one SHA-256 suffices; no password stretching.
    return hashlib.sha256(b"mwp-admission-log-service-secret\x00" + secret).digest()


def _entry_hash(
    seq: int,
    organization_id: str,
    signing_hash: str,
    admission_record_id: str,
    record: bytes,
    writer_id: str,
    prev_hash: str,
) -> str:
    return sha256_ref(
        canonicalize(
            {
                "seq": seq,
                "organizationId": organization_id,
                "signingHash": signing_hash,
                "admissionRecordId": admission_record_id,
                "record": b64url_encode(record),
                "writerId": writer_id,
                "prev": prev_hash,
            }
        )
    )


def _connect(path: Path, timeout: float, *, create: bool = False) -> sqlite3.Connection:
    # Operations open the file read-write but never create it: a mistyped path must be an
    # unavailable log, not a fresh empty one that would report every key as absent.
    uri = f"{path.resolve().as_uri()}?mode={'rwc' if create else 'rw'}"
    # Autocommit mode: transactions are opened explicitly, so their scope is visible here.
    connection = sqlite3.connect(uri, timeout=timeout, isolation_level=None, uri=True)
    try:
        connection.execute("PRAGMA synchronous = FULL")  # a commit survives power loss
    except BaseException:
        connection.close()
        raise
    return connection


def initialize(path: str | Path, *, timeout: float = 10.0) -> None:
    """Create the log file and its tables if needed; refuse a file of another version."""
    with closing(_connect(Path(path), timeout, create=True)) as connection:
        if _schema_version(connection) == SCHEMA_VERSION:
            return  # already initialized: no write lock needed
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("BEGIN IMMEDIATE")
        for statement in _statements(_SCHEMA):
            connection.execute(statement)
        version = _schema_version(connection)
        if version is None:
            connection.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif version != SCHEMA_VERSION:
            connection.execute("ROLLBACK")
            raise ValueError(f"admission log schema {version} is not {SCHEMA_VERSION}")
        connection.execute("COMMIT")


def _schema_version(connection: sqlite3.Connection) -> str | None:
    try:
        row = connection.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
    except sqlite3.OperationalError:  # no meta table yet
        return None
    return None if row is None else str(row[0])


def _statements(script: str) -> Iterator[str]:
    # executescript() would COMMIT our transaction first; run the statements one by one.
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""


def provision_service(
    path: str | Path,
    organization_id: str,
    service: Principal,
    secret: bytes,
    *,
    may_append: bool = True,
    timeout: float = 10.0,
) -> None:
    """Register (or re-key) a service for one Organization's log. An administrative action."""
    if service.type != "service" or not is_identifier(service.id):
        raise ValueError("only service Principals with an absolute identifier may use the log")
    if not is_identifier(organization_id):
        raise ValueError("organization_id must be an absolute identifier")
    if len(secret) < _MIN_SECRET_BYTES:
        raise ValueError(f"secret must be at least {_MIN_SECRET_BYTES} random bytes")
    initialize(path, timeout=timeout)
    with closing(_connect(Path(path), timeout)) as connection:
        connection.execute(
            "INSERT INTO services VALUES (?, ?, ?, ?) "
            "ON CONFLICT (organization_id, service_id) DO UPDATE SET "
            "secret_digest = excluded.secret_digest, may_append = excluded.may_append",
            (organization_id, service.id, _secret_digest(secret), int(may_append)),
        )


def revoke_service(
    path: str | Path, organization_id: str, service: Principal, *, timeout: float = 10.0
) -> None:
    """Withdraw a service's access. Records it already wrote stay, attributed to it."""
    with closing(_connect(Path(path), timeout)) as connection:
        connection.execute(
            "DELETE FROM services WHERE organization_id = ? AND service_id = ?",
            (organization_id, service.id),
        )


class SqliteAdmissionLog:
    """The Admission Log as seen by one authenticated service."""

    def __init__(
        self, path: str | Path, credential: ServiceCredential, *, timeout: float = 10.0
    ) -> None:
        # Opening touches nothing: the file must already exist (see :func:`initialize` and
        # :func:`provision_service`), and every problem surfaces as a typed result.
        self._path = Path(path)
        self._credential = credential
        self._timeout = timeout

    @property
    def path(self) -> Path:
        return self._path

    # --- AdmissionLog -----------------------------------------------------------------------

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        try:
            with self._transaction("BEGIN DEFERRED") as connection:
                self._authenticate(connection, organization_id)
                held = self._held(connection, organization_id, signing_hash)
        except _LogFailureError as failure:
            return LogFailed(failure.failure, failure.detail)
        if held is None:
            return LookupAbsent()
        return LookupFound(held.record, held.writer)

    def append_or_return_existing(
        self, organization_id: str, signing_hash: str, candidate: bytes
    ) -> AppendResult:
        try:
            # IMMEDIATE takes the write lock before reading, so the existence check and the
            # insert are one atomic step for every thread and process sharing the file.
            with self._transaction("BEGIN IMMEDIATE") as connection:
                writer, may_append = self._authenticate(connection, organization_id)
                if not may_append:
                    raise _LogFailureError(LogFailure.UNAUTHORIZED, "service may not append")
                decision = decide_append(
                    organization_id,
                    signing_hash,
                    candidate,
                    writer=writer,
                    existing=self._held(connection, organization_id, signing_hash),
                    record_id_key=lambda record_id: self._record_id_key(connection, record_id),
                )
                if isinstance(decision, FirstAdmissionRecord):
                    self._insert(connection, decision, writer)
                    committed: AppendResult = AppendCommitted(decision.raw, writer)
                else:
                    committed = decision
        except _LogFailureError as failure:
            return LogFailed(failure.failure, failure.detail)
        return committed

    # --- audit ------------------------------------------------------------------------------

    def verify_chain(self) -> LogFailed | None:
        """Re-check every entry and link of the whole file; None when all hold."""
        try:
            with self._transaction("BEGIN DEFERRED") as connection:
                prev = GENESIS
                for row in connection.execute(
                    "SELECT seq, organization_id, signing_hash, admission_record_id, record, "
                    "writer_id, prev_hash, entry_hash FROM admission_records ORDER BY seq"
                ):
                    if row[6] != prev:
                        raise _LogFailureError(
                            LogFailure.INTEGRITY_FAILED, f"chain broken at {row[0]}"
                        )
                    self._check_entry(row)
                    prev = row[7]
        except _LogFailureError as failure:
            return LogFailed(failure.failure, failure.detail)
        return None

    # --- internals --------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        try:
            connection = _connect(self._path, self._timeout)
        except sqlite3.Error as exc:
            raise _LogFailureError(LogFailure.UNAVAILABLE, f"cannot open the log: {exc}") from exc
        with closing(connection):
            try:
                connection.execute(begin)
            except sqlite3.Error as exc:
                raise _LogFailureError(LogFailure.UNAVAILABLE, f"cannot begin: {exc}") from exc
            try:
                yield connection
            except BaseException:
                with suppress(sqlite3.Error):  # a failed statement may have ended it already
                    connection.execute("ROLLBACK")
                raise
            try:
                connection.execute("COMMIT")
            except sqlite3.Error as exc:
                # SQLite rolls a failed COMMIT back as a whole: nothing was appended.
                raise _LogFailureError(LogFailure.COMMIT_FAILED, f"commit failed: {exc}") from exc

    def _authenticate(
        self, connection: sqlite3.Connection, organization_id: str
    ) -> tuple[Principal, bool]:
        credential = self._credential
        if organization_id != credential.organization_id or credential.service.type != "service":
            raise _LogFailureError(
                LogFailure.UNAUTHENTICATED, "credential is for another Organization"
            )
        row = self._query(
            connection,
            "SELECT secret_digest, may_append FROM services "
            "WHERE organization_id = ? AND service_id = ?",
            (organization_id, credential.service.id),
        )
        # Compare even when the service is unknown, so timing does not reveal which it was.
        stored = row[0] if row is not None else b"\x00" * 32
        matches = hmac.compare_digest(stored, _secret_digest(credential.secret))
        if row is None or not matches:
            raise _LogFailureError(LogFailure.UNAUTHENTICATED, "service authentication failed")
        return credential.service, bool(row[1])

    def _held(
        self, connection: sqlite3.Connection, organization_id: str, signing_hash: str
    ) -> HeldRecord | None:
        row = self._query(
            connection,
            "SELECT seq, organization_id, signing_hash, admission_record_id, record, writer_id, "
            "prev_hash, entry_hash FROM admission_records "
            "WHERE organization_id = ? AND signing_hash = ?",
            (organization_id, signing_hash),
        )
        if row is None:
            return None
        self._check_entry(row)
        predecessor = self._query(
            connection,
            "SELECT entry_hash FROM admission_records WHERE seq < ? ORDER BY seq DESC LIMIT 1",
            (row[0],),
        )
        if row[6] != (GENESIS if predecessor is None else predecessor[0]):
            raise _LogFailureError(
                LogFailure.INTEGRITY_FAILED, "entry is not linked to its predecessor"
            )
        return HeldRecord(bytes(row[4]), Principal("service", row[5]))

    def _check_entry(self, row: tuple[Any, ...]) -> None:
        seq, organization_id, signing_hash, record_id, record, writer_id, prev, entry = row
        if not (
            isinstance(seq, int)
            and isinstance(organization_id, str)
            and isinstance(signing_hash, str)
            and isinstance(record_id, str)
            and isinstance(record, bytes)
            and isinstance(writer_id, str)
            and isinstance(prev, str)
        ):
            raise _LogFailureError(
                LogFailure.INTEGRITY_FAILED, "entry columns have the wrong types"
            )
        expected = _entry_hash(
            seq, organization_id, signing_hash, record_id, record, writer_id, prev
        )
        if entry != expected:
            raise _LogFailureError(
                LogFailure.INTEGRITY_FAILED, f"entry {seq} does not match its hash"
            )
        try:
            parsed = parse_record(record)
        except AdmissionError as exc:
            raise _LogFailureError(
                LogFailure.INTEGRITY_FAILED, f"entry {seq} is not a record"
            ) from exc
        if (parsed.organization_id, parsed.signing_hash, parsed.admission_record_id) != (
            organization_id,
            signing_hash,
            record_id,
        ):
            raise _LogFailureError(
                LogFailure.INTEGRITY_FAILED, f"entry {seq} is filed under another key"
            )

    def _record_id_key(
        self, connection: sqlite3.Connection, record_id: str
    ) -> tuple[str, str] | None:
        row = self._query(
            connection,
            "SELECT organization_id, signing_hash FROM admission_records "
            "WHERE admission_record_id = ?",
            (record_id,),
        )
        return None if row is None else (str(row[0]), str(row[1]))

    def _insert(
        self, connection: sqlite3.Connection, record: FirstAdmissionRecord, writer: Principal
    ) -> None:
        last = self._query(
            connection,
            "SELECT seq, entry_hash FROM admission_records ORDER BY seq DESC LIMIT 1",
            (),
        )
        prev = GENESIS if last is None else str(last[1])
        # AUTOINCREMENT never reuses a number, and nothing is ever deleted, so max + 1 is next.
        seq = 1 if last is None else int(last[0]) + 1
        entry = _entry_hash(
            seq,
            record.organization_id,
            record.signing_hash,
            record.admission_record_id,
            record.raw,
            writer.id,
            prev,
        )
        try:
            connection.execute(
                "INSERT INTO admission_records VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    seq,
                    record.organization_id,
                    record.signing_hash,
                    record.admission_record_id,
                    record.raw,
                    writer.id,
                    prev,
                    entry,
                ),
            )
        except sqlite3.IntegrityError as exc:
            # Unreachable under the write lock unless the file was edited behind our back.
            raise _LogFailureError(LogFailure.INDETERMINATE, f"insert refused: {exc}") from exc
        except sqlite3.Error as exc:
            raise _LogFailureError(LogFailure.COMMIT_FAILED, f"insert failed: {exc}") from exc

    @staticmethod
    def _query(
        connection: sqlite3.Connection, sql: str, params: tuple[object, ...]
    ) -> tuple[Any, ...] | None:
        try:
            row: tuple[Any, ...] | None = connection.execute(sql, params).fetchone()
        except sqlite3.OperationalError as exc:
            raise _LogFailureError(LogFailure.UNAVAILABLE, f"log unavailable: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise _LogFailureError(LogFailure.INTEGRITY_FAILED, f"log file damaged: {exc}") from exc
        return row
