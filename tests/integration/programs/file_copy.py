"""Copies text lines from a FileSource to a FileSink with exactly-once checkpoints every 300 ms.

Each line is slowed down by DELAY_US microseconds so a test can kill a TaskManager mid-file.
With MONITOR_MS the source is unbounded and looks for new files that often.
Usage: file_copy.py IN_DIR OUT_DIR DELAY_US [MONITOR_MS]
"""
import sys
import time

from pyflink.common import Duration, RestartStrategies, WatermarkStrategy
from pyflink.common.serialization import Encoder
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    BucketAssigner, FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat,
)

IN, OUT, DELAY = sys.argv[1], sys.argv[2], int(sys.argv[3]) / 1e6
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(300, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 500))
builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), IN)
if len(sys.argv) > 4:
    builder = builder.monitor_continuously(Duration.of_millis(int(sys.argv[4])))
source = builder.build()
lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").uid("lines")
slow = lines.map(lambda line: (time.sleep(DELAY), line.upper())[1]).uid("upper")
slow.sink_to(
    FileSink.for_row_format(OUT, Encoder.simple_string_encoder())
    .with_output_file_config(OutputFileConfig.builder().with_part_prefix("copy").with_part_suffix(".txt").build())
    .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
    .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
    .build()
).uid("files")
env.execute("file copy")
