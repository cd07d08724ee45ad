"""Numbers 0..N-1 at RATE records/s into a two-phase-commit SinkFunction whose commit takes COMMIT_S.

The sink pre-commits its records at each checkpoint or savepoint (operator list state) and, when
that completes, sleeps COMMIT_S seconds and writes them to OUT_DIR in one file named by the
checkpoint, its subtask and its first record: committing the same records twice (a commit redone
after a restore) writes the same file, as a real two-phase commit must be idempotent.
Usage: slow_commit.py OUT_DIR N RATE COMMIT_S
"""
import os
import sys
import time

from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.functions import CheckpointedFunction, CheckpointListener, RuntimeContext, SinkFunction
from pyflink.datastream.state import ListStateDescriptor

OUT, N, RATE, COMMIT_S = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])


class SlowCommitting(SinkFunction, CheckpointedFunction, CheckpointListener):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("staged", None))
        self.pending, self.staged = [], {}
        if context.is_restored():
            # Pre-committed for the snapshot this run resumes from: its completion may never have been heard.
            by_checkpoint = {}
            for cid, v in self.state.get():
                by_checkpoint.setdefault(cid, []).append(v)
            for cid, values in sorted(by_checkpoint.items()):
                self._write(cid, values)

    def invoke(self, value, context):
        self.pending.append(value)

    def snapshot_state(self, context):
        cid = context.get_checkpoint_id()
        self.staged[cid], self.pending = self.pending, []
        self.state.update([[c, v] for c in sorted(self.staged) for v in self.staged[c]])

    def notify_checkpoint_complete(self, checkpoint_id):
        time.sleep(COMMIT_S)
        for cid in sorted(c for c in self.staged if c <= checkpoint_id):
            self._write(cid, self.staged.pop(cid))

    def _write(self, cid, values):
        if values:
            values = sorted(values)
            name = os.path.join(OUT, f"{cid}-{values[0]}-{len(values)}.txt")
            tmp = f"{name}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write("\n".join(map(str, values)))
            os.replace(tmp, name)


env = StreamExecutionEnvironment.get_execution_environment()
numbers = env.from_source(DataGeneratorSource(lambda i: i, N, RATE), WatermarkStrategy.no_watermarks(), "numbers")
numbers.uid("numbers").add_sink(SlowCommitting()).uid("committing")
env.execute("slow commit")
