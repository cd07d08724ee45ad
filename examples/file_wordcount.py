"""Word count from text files to part files, exactly once, with checkpoints every second.

Reads every visible file under INPUT (a file or a directory) and writes ``(word, count)``
updates to part files under OUTPUT; a part file becomes visible when the checkpoint that
covers it completes (or at the end of the input), so a failure never shows a line twice.

Run it in-process:            python examples/file_wordcount.py INPUT OUTPUT
Run it on a local cluster:    millstream run -p 2 examples/file_wordcount.py INPUT OUTPUT
"""
import sys

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat


def main(input_path: str, output_path: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), input_path).process_static_file_set().build()
    counts = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "file source")
        .flat_map(lambda line: [(w, 1) for w in line.split()], output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda pair: pair[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    counts.sink_to(
        FileSink.for_row_format(base_path=output_path, encoder=Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("counts").with_part_suffix(".txt").build())
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )
    env.execute("file wordcount")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: file_wordcount.py INPUT OUTPUT")
    main(sys.argv[1], sys.argv[2])
