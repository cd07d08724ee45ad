"""StateTtlConfig.Builder: every option and what the built config reports."""
from pyflink.common import Time
from pyflink.datastream.state import StateTtlConfig, ValueStateDescriptor

S = StateTtlConfig
configs = {
    "default": S.new_builder(Time.seconds(1)).build(),
    "read_write": S.new_builder(Time.seconds(2)).update_ttl_on_read_and_write().return_expired_if_not_cleaned_up().build(),
    "disabled_update": S.new_builder(Time.seconds(3)).set_update_type(S.UpdateType.Disabled).build(),
    "no_background": S.new_builder(Time.seconds(4)).disable_cleanup_in_background().build(),
    "full_snapshot": S.new_builder(Time.seconds(5)).cleanup_full_snapshot().build(),
    "incremental": S.new_builder(Time.seconds(6)).cleanup_incrementally(10, True).build(),
    "rocksdb": S.new_builder(Time.seconds(7)).cleanup_in_rocksdb_compact_filter(500).build(),
    "processing_time": S.new_builder(Time.seconds(8)).set_ttl_time_characteristic(S.TtlTimeCharacteristic.ProcessingTime).use_processing_time().never_return_expired().set_ttl(Time.seconds(9)).build(),
}
for name, c in configs.items():
    cs = c.get_cleanup_strategies()
    inc = cs.get_incremental_cleanup_strategy()
    rdb = cs.get_rocksdb_compact_filter_cleanup_strategy()
    print(
        name,
        c.get_ttl().to_milliseconds(),
        c.get_update_type().name,
        c.get_state_visibility().name,
        c.get_ttl_time_characteristic().name,
        c.is_enabled(),
        cs.is_cleanup_in_background(),
        cs.in_full_snapshot(),
        None if inc is None else (inc.get_cleanup_size(), inc.run_cleanup_for_every_record()),
        None if rdb is None else rdb.get_query_time_after_num_entries(),
    )
d = ValueStateDescriptor("v", None)
d.enable_time_to_live(configs["default"])
print("descriptor accepts ttl")
