"""Runners for the protocol bundle's three conformance suites (I/O lives here, not in core)."""
