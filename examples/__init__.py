"""Runnable examples (``mwp agent run examples.writer:agent``)."""
