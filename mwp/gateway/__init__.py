"""The Group gateway: MWP's WebSocket binding (spec 17) over TLS 1.3, in the authority zone.

* :mod:`mwp.gateway.frames`: one WebSocket message in, a typed frame or a typed ``ERROR`` out;
* :mod:`mwp.gateway.tls`: TLS 1.3-only contexts and the development CA;
* :mod:`mwp.gateway.hello`: the HELLO challenge-response and the session it opens (pure);
* :mod:`mwp.gateway.authority`: what the gateway asks of the authority side (Registry,
  Session Epochs, Mission Updates, the signed Group log);
* :mod:`mwp.gateway.subscriptions`: SUBSCRIBE delivery, one reader per Group, one feed per
  (connection, Group), with :mod:`mwp.gateway.visibility` (the Membership timeline) and
  :mod:`mwp.gateway.attention` (attention filters);
* :mod:`mwp.gateway.discovery`: standing subscriptions (:data:`MEMBER_GROUPS`), the Groups an
  Agent is a member of, found and watched;
* :mod:`mwp.gateway.hints`: the mirror's content-free hints that a Group's log grew;
* :mod:`mwp.gateway.server`: the server and one connection's frame loop;
* :mod:`mwp.gateway.client`: a small client of the binding (tests, agents).

``docs/gateway.md`` says what is served and what is not built yet.
"""

from typing import Final

# A SUBSCRIBE entry with this ``groupId`` stands for every Group the Agent is or was a member
# of (no Group has this ID). Defined here, importing nothing: the mirror imports the package.
MEMBER_GROUPS: Final = "urn:missionweave-temporal:gateway:member-groups"

__all__ = ["MEMBER_GROUPS"]
