"""The ExecutionGraph: a JobGraph expanded into subtasks and attempts (pure)."""
