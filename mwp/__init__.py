"""MissionWeave on Temporal: a MissionWeaveProtocol 0.1 runtime."""

__version__ = "0.1.0"
PROTOCOL_VERSION = "0.1"
