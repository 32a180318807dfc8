"""The signed Group Event log on an object store: sealing, delivery, compaction, rebuild, keys."""
