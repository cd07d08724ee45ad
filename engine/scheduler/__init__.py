"""Scheduling decisions: which slot runs which subtask (pure)."""
