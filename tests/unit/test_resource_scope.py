"""The Work Contract's resource grants as a capability token's scope (MWP-AUT-001): a grant
names only the contract's resources and operations, and each access is checked pair by
pair, since the token's own sets are flat."""

from __future__ import annotations

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.resource_scope import INVOKE, ResourceScope

REPO, WIKI = "urn:mwp:resource:repo", "urn:mwp:resource:wiki"
SCOPE = ResourceScope.of(
    {
        "allowedResources": [
            {"resource": REPO, "operations": ["read"]},
            {"resource": WIKI, "operations": ["read", "write"]},
        ]
    }
)


def refused(action: object) -> str:
    with pytest.raises(MwpError) as error:
        assert callable(action)
        action()
    assert error.value.code is ErrorCode.AUTH_FORBIDDEN and error.value.diagnostic is not None
    return error.value.diagnostic.reason


def test_a_grant_names_only_what_the_contract_allows() -> None:
    assert SCOPE.resources == {REPO, WIKI}
    assert SCOPE.operations == {INVOKE, "read", "write"}
    SCOPE.check_grant([REPO, WIKI], [INVOKE, "read", "write"])
    SCOPE.check_grant([], [INVOKE])
    assert refused(lambda: SCOPE.check_grant([REPO, "urn:x"], [INVOKE])) == "grant-resource"
    assert refused(lambda: SCOPE.check_grant([REPO], ["delete"])) == "grant-operation"


def test_each_access_is_checked_pair_by_pair() -> None:
    SCOPE.check_access("read", [REPO, WIKI])
    SCOPE.check_access("write", [WIKI])
    SCOPE.check_access("write", [])  # touching nothing needs no pair
    assert refused(lambda: SCOPE.check_access("write", [WIKI, REPO])) == "access"
    assert refused(lambda: SCOPE.check_access("read", ["urn:x"])) == "access"


def test_a_contract_without_resources_allows_only_the_tool_operation() -> None:
    empty = ResourceScope.of({"allowedResources": []})
    assert empty.operations == {INVOKE} and not empty.resources
    assert refused(lambda: empty.check_grant([REPO], [INVOKE])) == "grant-resource"
