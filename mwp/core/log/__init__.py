"""The Group Event log's pure part: the hash chain, Cursors and signed Group Snapshots."""
