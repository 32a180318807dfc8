"""A worker process that runs only the Group Event log mirror, on a given task queue.

The crash test starts it with ``python -m tests.integration.mirror_worker`` and kills it with
SIGKILL, as an operator's worker might die between acceptance and mirroring.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from mwp.activities.mirror import Mirror
from mwp.log.keys import AuthorityKeyring
from mwp.stores.objects import open_store


async def serve(address: str, task_queue: str, keyring: Path, log_store: str) -> None:
    client = await Client.connect(address)
    mirror = Mirror(open_store(log_store), AuthorityKeyring(keyring))
    with ThreadPoolExecutor(max_workers=2) as executor:
        worker = Worker(
            client,
            task_queue=task_queue,
            activities=[mirror.mirror_events, mirror.archive_group],
            activity_executor=executor,
        )
        print("mirror worker ready", flush=True)
        await worker.run()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--keyring", type=Path, required=True)
    parser.add_argument("--log-store", required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue, args.keyring, args.log_store))
    os._exit(0)


if __name__ == "__main__":
    main()
