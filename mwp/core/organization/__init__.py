"""The Organization's Agent Registry service: its Commands, state and notices to Groups."""
