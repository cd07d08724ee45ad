"""Hand-written PySpark word count: the baseline for the translated Millstream job.

``python benchmarks/spark_baseline.py FILE [--master local[*]] [--partitions N]``
prints the number of distinct words and the seconds spent in the Spark job.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from operator import add


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--partitions", type=int, default=os.cpu_count() or 2)
    ns = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    sc = SparkContext(conf=SparkConf().setMaster(ns.master).setAppName("wordcount-baseline").set("spark.ui.showConsoleProgress", "false"))
    sc.setLogLevel("WARN")
    started = time.perf_counter()
    counts = (
        sc.textFile(ns.path, minPartitions=ns.partitions)
        .flatMap(lambda line: line.split())
        .map(lambda w: (w, 1))
        .reduceByKey(add, numPartitions=ns.partitions)
        .collect()
    )
    total = sum(n for _, n in counts)
    print(f"distinct words: {len(counts)}; total words: {total}; job seconds: {time.perf_counter() - started:.2f}")
    sc.stop()


if __name__ == "__main__":
    main()
