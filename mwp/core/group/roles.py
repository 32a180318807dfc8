"""Who may act: role and policy predicates (Authority step 7) over current Group state.

An Organization service is authorized by Organization policy, not by a Membership; the
Authority trusts any authenticated service Principal for the service-permitted kinds.
"""

from __future__ import annotations

from collections.abc import Callable

from mwp.core.group.incoming import Incoming
from mwp.core.group.rejection import forbidden
from mwp.core.group.state import GroupState

Authorize = Callable[[GroupState, Incoming], None]


def is_mission_owner(state: GroupState, cmd: Incoming) -> bool:
    mission = state.mission
    return (
        mission is not None
        and mission.owner["id"] == cmd.actor_id
        and mission.owner["type"] == cmd.actor_type
    )


def is_current_coordinator(state: GroupState, cmd: Incoming) -> bool:
    lease = state.coordinator
    return cmd.is_agent and lease is not None and lease.agent_id == cmd.actor_id


def role_of(state: GroupState, cmd: Incoming) -> str | None:
    membership = state.memberships.get(cmd.actor_id)
    return membership.role if membership is not None else None


def anyone(state: GroupState, cmd: Incoming) -> None:
    """Any member (checked at step 4) or Organization service."""


def members_only(state: GroupState, cmd: Incoming) -> None:
    if cmd.is_service:
        forbidden(f"{cmd.kind} is a member action; services hold no Membership")


def owner_or_service(state: GroupState, cmd: Incoming) -> None:
    if not (cmd.is_service or is_mission_owner(state, cmd)):
        forbidden(f"only the MissionOwner or Organization policy may issue {cmd.kind}")


def owner_only(state: GroupState, cmd: Incoming) -> None:
    if not is_mission_owner(state, cmd):
        forbidden(f"only the MissionOwner may issue {cmd.kind}")


def coordinator_only(state: GroupState, cmd: Incoming) -> None:
    if not is_current_coordinator(state, cmd):
        forbidden(f"only the current Coordinator may issue {cmd.kind}")


def coordinator_or_service(state: GroupState, cmd: Incoming) -> None:
    if not (cmd.is_service or is_current_coordinator(state, cmd)):
        forbidden(f"only the current Coordinator or Organization policy may issue {cmd.kind}")


def coordinator_or_owner(state: GroupState, cmd: Incoming) -> None:
    """The Coordinator, or the MissionOwner's audited emergency override (spec 7.1, 9.1)."""
    if not (is_current_coordinator(state, cmd) or is_mission_owner(state, cmd)):
        forbidden(f"only the current Coordinator or the MissionOwner may issue {cmd.kind}")


def coordinator_owner_or_service(state: GroupState, cmd: Incoming) -> None:
    if not (cmd.is_service or is_current_coordinator(state, cmd) or is_mission_owner(state, cmd)):
        forbidden(f"{cmd.kind} needs the Coordinator, the MissionOwner or Organization policy")


def working_agent(state: GroupState, cmd: Incoming) -> None:
    """Execution Commands: an agent that may hold WorkItems (a worker, or the Coordinator
    doing coordination-native work). Ownership of the item is checked by the kind's rule."""
    if not cmd.is_agent or role_of(state, cmd) not in ("worker", "coordinator"):
        forbidden(f"{cmd.kind} is issued by a working agent")


def working_agent_or_service(state: GroupState, cmd: Incoming) -> None:
    if not cmd.is_service:
        working_agent(state, cmd)


def coordinator_or_working_agent(state: GroupState, cmd: Incoming) -> None:
    if not is_current_coordinator(state, cmd):
        working_agent(state, cmd)


def coordinator_owner_or_working_agent(state: GroupState, cmd: Incoming) -> None:
    if not (is_current_coordinator(state, cmd) or is_mission_owner(state, cmd)):
        working_agent(state, cmd)
