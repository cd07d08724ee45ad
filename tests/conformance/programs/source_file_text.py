"""FileSource reading text lines from a file the program writes first; a word count collected."""
import os
import tempfile

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

directory = tempfile.mkdtemp()
path = os.path.join(directory, "input.txt")
with open(path, "w") as f:
    f.write("red green\nblue red\n\nred\n")

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
counts = lines.flat_map(lambda line: [(w, 1) for w in line.split()],
                        output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
    .key_by(lambda t: t[0]).sum(1)
for v in counts.execute_and_collect():
    print(v)
