"""The Mission Group and its archival state."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from mwp.core.models._base import WireModel
from mwp.core.models.common import Extensions, Identifier, Timestamp


class Group(WireModel):
    group_id: Identifier
    mission_id: Identifier
    state: Literal["active", "archived"]
    main_conversation_id: Identifier
    created_at: Timestamp
    archived_at: Timestamp | None = None
    archive_snapshot_id: Identifier | None = None
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _archival(self) -> Self:
        # Archival is recorded together with the signed snapshot that closes the log.
        if self.state == "archived":
            self._require("archived_at", "archive_snapshot_id", when="the Group is archived")
        else:
            self._forbid("archived_at", "archive_snapshot_id", when="the Group is active")
        return self
