"""The pure protocol core: no I/O, no Temporal imports, deterministic."""
