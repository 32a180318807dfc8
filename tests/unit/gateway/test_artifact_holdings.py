"""Which content a Group holds, as the gateway reads it from the Group's Events: what it
published, what it imported from another Group (MWP-WRK-028), what its contracts name."""

from __future__ import annotations

from mwp.core.group.knowledge import IMPORTED_KIND
from mwp.gateway.artifacts import PUBLISHED_KIND, _named

HASH = "sha256:" + "ab" * 32


def test_published_and_imported_content_is_the_group_s_and_nothing_else_is() -> None:
    manifest = {"manifest": {"contentHash": HASH}}
    assert _named(PUBLISHED_KIND, manifest) == [HASH]
    assert _named(IMPORTED_KIND, manifest) == [HASH]
    assert _named("message.posted", manifest) == []
    contract = {"workItem": {"contract": {"inputArtifacts": [HASH]}}}
    assert _named("work.authorized", contract) == [HASH]
