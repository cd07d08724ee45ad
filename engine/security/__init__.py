"""Cluster-secret authentication of what crosses Redis and disk (engine/security/mac.py) and the
receivers' replay windows for control messages (engine/security/replay.py)."""
