"""The JobManager: per-job scheduling and coordination behind small gateways."""
