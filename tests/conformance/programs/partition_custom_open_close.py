"""partition_custom with a Partitioner and a KeySelector that have open()/close(): whether they are
called shows in which subtask prints each record (the partitioner's open() adds 2 to the subtask
index, the key selector's open() 1)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeySelector, Partitioner, RuntimeContext


class ToOpened(Partitioner):
    opened = False

    def open(self, runtime_context: RuntimeContext):
        self.opened = True

    def partition(self, key, num_partitions: int) -> int:
        return (2 if self.opened else 0) + (1 if key.endswith("!") else 0)


class ByWord(KeySelector):
    mark = ""

    def open(self, runtime_context: RuntimeContext):
        self.mark = "!"

    def get_key(self, value):
        return value[0] + self.mark


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(4)
words = env.from_collection([("a", 1), ("b", 2), ("c", 3)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
words.partition_custom(ToOpened(), ByWord()) \
    .map(lambda w: w[0] + ":" + str(w[1]), output_type=Types.STRING()).print()
env.execute("partition_custom_open_close")
