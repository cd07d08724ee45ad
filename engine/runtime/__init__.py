"""The task runtime: operators, partitioners, the data plane and the task loop."""
