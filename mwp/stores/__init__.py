"""Durable stores behind the core's typed interfaces."""
