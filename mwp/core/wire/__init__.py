"""The wire: strict JSON, JCS canonical bytes, the value profiles and Ed25519."""
