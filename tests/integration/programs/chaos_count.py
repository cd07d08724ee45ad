"""The chaos test's program: a keyed count over 40 keys with exactly-once checkpoints every 500 ms,
every update written to an exactly-once FileSink (``key,count`` lines) by one job and collected by
execute_and_collect in another, both from the same deterministic source. (execute_and_collect runs
the collected stream alone, as PyFlink 2.3 does, so the FileSink job is started first with
execute_async.) Writes what the client received, in order, to COLLECTED as JSON.

With DEPS_DIR (the multi-host test), the key function comes from ``chaos_keys.py`` in that directory,
outside the program's directory and installed on no TaskManager host: ``add_python_file`` ships it;
a ``requirements.txt`` there, with its wheels in ``DEPS_DIR/wheels``, is shipped by
``set_python_requirements`` and installed for the job on each TaskManager.
Usage: chaos_count.py N RATE OUT_DIR COLLECTED [DEPS_DIR]
"""
import json
import sys

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.common.serialization import Encoder
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy

N, RATE, OUT, COLLECTED = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1000, 500))
if len(sys.argv) > 5:
    sys.path.insert(0, sys.argv[5])  # the client imports it from where it is,
    from chaos_keys import key_of
    env.add_python_file(sys.argv[5] + "/chaos_keys.py")  # and ships it with the job
    import os
    if os.path.exists(sys.argv[5] + "/requirements.txt"):
        env.set_python_requirements(sys.argv[5] + "/requirements.txt", sys.argv[5] + "/wheels")
else:
    def key_of(i):
        return "k%d" % (i % 40), 1
source = DataGeneratorSource(key_of, N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
sink = (FileSink.for_row_format(OUT, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=16 * 1024))
        .build())
counts.map(lambda t: "%s,%d" % t).uid("lines").sink_to(sink).uid("files")
files = env.execute_async("chaos file sink")
with counts.execute_and_collect("chaos collect") as updates:
    received = [list(u) for u in updates]
with open(COLLECTED, "w") as f:
    json.dump(received, f)
files.get_job_execution_result().result()
print("received", len(received))
