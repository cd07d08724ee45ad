"""REST routers, one per resource, in Flink's REST shapes."""
