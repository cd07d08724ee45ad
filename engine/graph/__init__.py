"""Graphs: transformations, the StreamGraph and the chained JobGraph (pure, no I/O)."""
