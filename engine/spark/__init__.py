"""The Spark runner: bounded (BATCH) jobs translated from their JobGraph to PySpark RDDs.

``validation`` decides from the JobGraph alone whether a job can run here,
``partitions`` holds each operator's per-partition logic (``windows`` for
keyed windows, ``co_operators`` for CoMap/CoFlatMap, ``timer_service`` for
timers in BATCH, ``timestamps`` for event time), ``translator`` builds the
RDD pipeline, ``driver`` is the process that runs it, and
``spark_job_master`` is the JobManager's side of a Spark job.
"""
