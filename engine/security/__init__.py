"""Cluster-secret authentication of what crosses Redis (engine/security/mac.py)."""
