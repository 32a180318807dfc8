"""The plans a Coordinator runtime wrote down before acting on them, in its own folder.

A plan function may not give the same plan twice (a model, a person), so the runtime journals
each plan before it authorizes the first item: after a restart it authorizes what is missing
of the plan it made, never a second one. A Coordinator that took a Mission over journals the
WorkItems it adopted the same way (with the contracts of those its predecessor's remaining plan
gave), so it never plans that Mission. The latest hand-over Context Package it published is
noted too: until its log shows that package, a restarted runtime publishes no other. So is the
answer of ``reuse`` (the Artifacts of other Missions the Group imports): asked once per Mission.
One JSON file per Group, replaced atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from mwp.coordinator.codec import item_json as _item_json
from mwp.coordinator.codec import item_of as _item
from mwp.coordinator.codec import source_json, source_of
from mwp.coordinator.declaration import KnowledgeSource
from mwp.coordinator.reconcile import JournaledPlan, PackageRecord

Json = dict[str, Any]


class PlanJournal:
    """``folder``/<hash of the Group ID>.json: the Group's plans, oldest first."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, group_id: str) -> Path:
        return self.folder / f"{hashlib.sha256(group_id.encode()).hexdigest()[:32]}.json"

    def plans(self, group_id: str) -> list[JournaledPlan]:
        path = self._path(group_id)
        if not path.exists():
            return []
        document = json.loads(path.read_text("utf-8"))
        return [
            JournaledPlan(
                p["answers"],
                tuple(_item(i) for i in p["items"]),
                bool(p.get("proposal")),
                tuple(p.get("adopted", ())),  # absent from journals written before it
                tuple(p.get("contracts", ())),  # absent from journals written before it
            )
            for p in document["plans"]
        ]

    def _document(self, group_id: str) -> Json:
        path = self._path(group_id)
        if not path.exists():
            return {"groupId": group_id, "plans": []}
        document: Json = json.loads(path.read_text("utf-8"))
        return document

    def answered(self, group_id: str) -> set[str]:
        """The IDs of the Messages the Coordinator answered (or chose not to) in the Group."""
        return set(self._document(group_id).get("answered", []))

    def answer(self, group_id: str, message_id: str) -> None:
        document = self._document(group_id)
        document["answered"] = [*document.get("answered", []), message_id]
        self._write(group_id, document)

    def reused(self, group_id: str) -> tuple[KnowledgeSource, ...] | None:
        """What ``reuse`` answered for the Group's Mission (None: not asked yet)."""
        value = self._document(group_id).get("reuse")
        return None if value is None else tuple(source_of(s) for s in value)

    def reuse(self, group_id: str, sources: tuple[KnowledgeSource, ...]) -> None:
        document = self._document(group_id)
        document["reuse"] = [source_json(s) for s in sources]
        self._write(group_id, document)

    def handover(self, group_id: str) -> PackageRecord | None:
        """The latest hand-over Context Package the Coordinator published in the Group."""
        value = self._document(group_id).get("handover")
        if value is None:
            return None
        return PackageRecord(
            value["contextPackageId"],
            value["version"],
            tuple(value["eventIds"]),
            tuple(value.get("remaining", ())),  # absent from journals written before it
        )

    def hand_over(self, group_id: str, package: PackageRecord) -> None:
        document = self._document(group_id)
        document["handover"] = {
            "contextPackageId": package.context_package_id,
            "version": package.version,
            "eventIds": list(package.event_ids),
            "remaining": list(package.remaining),
        }
        self._write(group_id, document)

    def add(self, group_id: str, plan: JournaledPlan) -> None:
        plans = [*self.plans(group_id), plan]
        document = {
            **self._document(group_id),
            "groupId": group_id,
            "plans": [
                {
                    "answers": p.answers,
                    "items": [_item_json(i) for i in p.items],
                    "proposal": p.proposal,
                    "adopted": list(p.adopted),
                    "contracts": [dict(c) if c is not None else None for c in p.contracts],
                }
                for p in plans
            ],
        }
        self._write(group_id, document)

    def _write(self, group_id: str, document: Json) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(group_id)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(document, indent=1), "utf-8")
        os.replace(partial, path)
