"""The MWP client SDK: connect to Temporal, sign as a human, agent or service, and talk to the
Organization's registry (later also to Missions).

>>> client = await connect("127.0.0.1:7233")
>>> registrar = Identity.generate(Principal("service", "urn:mwp:service:acme:registry"))
>>> registry = await client.start_registry("urn:mwp:organization:acme", registrar)
>>> ada = Identity.generate(Principal("human", "urn:mwp:human:ada"))
>>> await registry.register_binding(ada)
>>> evidence = await registry.evidence()          # complete RegistryEvidence for stage 4

Every Command is signed here and decided by an Authority workflow as a Temporal Update; a
rejection comes back as a typed :class:`~mwp.core.errors.MwpError` (a
:class:`~mwp.contracts.errors.RemoteMwpError` carrying the wire error object).

Extension points: Mission Commands (``create_mission``, ``send``, ``mission_view``...) belong
on :class:`MwpClient` and go through :meth:`MwpClient.send_command`, which already does the
signing-hash Update ID and the error mapping; signing is :meth:`Identity.command`.
"""

from mwp.client.connection import MwpClient, OrganizationRegistryClient, connect
from mwp.client.identity import (
    KEY_FILE_FORMAT,
    ClientError,
    Identity,
    KeyStore,
    agent_card,
    dev_capability,
    new_id,
    utc_now,
    wire_text,
)

__all__ = [
    "KEY_FILE_FORMAT",
    "ClientError",
    "Identity",
    "KeyStore",
    "MwpClient",
    "OrganizationRegistryClient",
    "agent_card",
    "connect",
    "dev_capability",
    "new_id",
    "utc_now",
    "wire_text",
]
