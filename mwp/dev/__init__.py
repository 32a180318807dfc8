"""The embedded stack (Temporal dev server, SeaweedFS, the authority worker) and the demos."""
