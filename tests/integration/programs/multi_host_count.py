"""The multi-host test's program: a checkpointed keyed count over 20 keys, every update written to an
exactly-once FileSink and collected by the client. Its key function lives in a module of a
directory given on the command line, outside the program's directory and installed on no
TaskManager host: ``add_python_file`` ships it.
Usage: multi_host_count.py N RATE OUT_DIR COLLECTED DEPS_DIR
"""
import json
import sys

N, RATE, OUT, COLLECTED, DEPS = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
sys.path.insert(0, DEPS)

from keys_of_host_test import key_of  # noqa: E402  (shipped below, imported here by the client only)
from pyflink.common import RestartStrategies, WatermarkStrategy  # noqa: E402
from pyflink.common.serialization import Encoder  # noqa: E402
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment  # noqa: E402
from pyflink.datastream.connectors import DataGeneratorSource  # noqa: E402
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy  # noqa: E402

env = StreamExecutionEnvironment.get_execution_environment()
env.add_python_file(DEPS + "/keys_of_host_test.py")
env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1000, 500))
source = DataGeneratorSource(key_of, N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
sink = FileSink.for_row_format(OUT, Encoder.simple_string_encoder()).with_rolling_policy(
    RollingPolicy.default_rolling_policy(part_size=4 * 1024)).build()
counts.map(lambda t: "%s,%d" % t).uid("lines").sink_to(sink).uid("files")
files = env.execute_async("multi-host file sink")
with counts.execute_and_collect("multi-host collect") as updates:
    received = [list(u) for u in updates]
with open(COLLECTED, "w") as f:
    json.dump(received, f)
files.get_job_execution_result().result()
print("received", len(received))
