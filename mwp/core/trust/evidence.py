"""Stage 4 without Registry evidence (spec 6.4): the refusal a verifier raises when it has none.

A verifier that holds no coherent Registry revision for the signer's Organization (none has
arrived yet, the one held does not validate, or the six-stage result never reached the
decision) cannot resolve the key, so the document fails stage 4 exactly as an unknown key
does: ``AUTH_INVALID_SIGNATURE`` on the wire, the same for every reason, and the cause only in
the protected diagnostic. An ``INTERNAL_ERROR`` would tell the sender something different
happened, and invite a retry that evidence may never answer.
"""

from __future__ import annotations

from mwp.core.errors import ErrorCode
from mwp.core.trust.signed_document import VerificationError

CLAUSES: tuple[str, ...] = ("MWP-SDV-011",)

KEY_RESOLUTION_STAGE = "key-resolution"
EVIDENCE_UNAVAILABLE = "registry-evidence-unavailable"


def evidence_unavailable() -> VerificationError:
    """The stage-4 refusal for a document verified against no Registry evidence."""
    return VerificationError(
        ErrorCode.AUTH_INVALID_SIGNATURE, KEY_RESOLUTION_STAGE, EVIDENCE_UNAVAILABLE
    )
