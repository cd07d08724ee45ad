"""A keyed count over KEYS keys on the on-disk state backend with incremental checkpoints every
300 ms (EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)), restarting on failure.
Every count update goes to a FileSink as ``key,count`` lines (exactly once in its committed files);
checkpoints go to CHECKPOINT_DIR, two retained.
Usage: incremental_count.py N RATE KEYS OUT_DIR CHECKPOINT_DIR [BACKEND] [KEY_KIND]
(BACKEND hashmap: the heap backend with ``state.backend.incremental: true``; hashmap-whole: the heap
backend, not incremental, with ``state.backend.hashmap.full-checkpoints-from-changes: true``; KEY_KIND int: the keys
are ints, written as ``k<n>`` all the same, which the heap backend's change log takes.)
"""
import sys

from pyflink.common import Configuration, RestartStrategies, WatermarkStrategy
from pyflink.common.serialization import Encoder
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy
from pyflink.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend

N, RATE, KEYS, OUT, CHECKPOINTS = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
env = StreamExecutionEnvironment.get_execution_environment()
if len(sys.argv) > 6 and sys.argv[6] == "hashmap":
    env.set_state_backend(HashMapStateBackend())
    env.configure(Configuration().set_string("state.backend.incremental", "true"))
elif len(sys.argv) > 6 and sys.argv[6] == "hashmap-whole":  # not incremental: whole files built from the changes
    env.set_state_backend(HashMapStateBackend())
    env.configure(Configuration().set_string("state.backend.hashmap.full-checkpoints-from-changes", "true"))
else:
    env.set_state_backend(EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True))
env.enable_checkpointing(300, CheckpointingMode.EXACTLY_ONCE)
env.get_checkpoint_config().set_checkpoint_storage_dir(CHECKPOINTS)
env.get_checkpoint_config().set_num_retained_checkpoints(2)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 500))
INT_KEYS = len(sys.argv) > 7 and sys.argv[7] == "int"
if INT_KEYS:
    source = DataGeneratorSource(lambda i: (i % KEYS, 1), N, records_per_second=RATE)
else:
    source = DataGeneratorSource(lambda i: ("k%d" % (i % KEYS), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
sink = (FileSink.for_row_format(OUT, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=64 * 1024))
        .build())
counts.map((lambda t: "k%d,%d" % t) if INT_KEYS else (lambda t: "%s,%d" % t)).uid("lines").sink_to(sink).uid("files")
env.execute("incremental count")
