"""The TaskManager process (TaskExecutor in Flink) and its slot processes."""
