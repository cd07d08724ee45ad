"""The Spark runner: bounded (BATCH) jobs translated from their JobGraph to PySpark RDDs.

``validation`` decides from the JobGraph alone whether a job can run here,
``partitions`` holds each operator's per-partition logic, ``translator``
builds the RDD pipeline, ``driver`` is the process that runs it, and
``spark_job_master`` is the JobManager's side of a Spark job.
"""
