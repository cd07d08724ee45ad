"""Stream operators: the runtime side of each transformation, working on batches."""
