"""State descriptors with a StateTtlConfig (long TTL, so nothing expires during the run)."""
from pyflink.common import Time, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, StateTtlConfig, ValueStateDescriptor


class Remember(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        ttl = (StateTtlConfig.new_builder(Time.minutes(10))
               .set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)
               .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
               .cleanup_full_snapshot()
               .build())
        last = ValueStateDescriptor("last", Types.STRING())
        last.enable_time_to_live(ttl)
        seen = ListStateDescriptor("seen", Types.STRING())
        seen.enable_time_to_live(ttl)
        self.last = runtime_context.get_state(last)
        self.seen = runtime_context.get_list_state(seen)

    def process_element(self, value, ctx):
        previous = self.last.value()
        self.last.update(value[1])
        self.seen.add(value[1])
        yield f"{value[0]}: previous={previous} all={list(self.seen.get())}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(1, "a"), (2, "b"), (1, "c"), (1, "d"), (2, "e")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.INT(), Types.STRING()]))
ds.key_by(lambda v: v[0], key_type=Types.INT()).process(Remember(), output_type=Types.STRING()).print()
env.execute()
