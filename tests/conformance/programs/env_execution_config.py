"""ExecutionConfig and environment getters/setters a program may call; prints what it reads back."""
from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)
env.set_max_parallelism(64)
env.set_buffer_timeout(5)
env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
config = env.get_config()
config.set_auto_watermark_interval(150)
config.set_global_job_parameters({"greeting": "hello", "n": "3"})
config.enable_object_reuse()
print("parallelism", env.get_parallelism(), config.get_parallelism())
print("max parallelism", env.get_max_parallelism(), config.get_max_parallelism())
print("buffer timeout", env.get_buffer_timeout())
print("watermark interval", config.get_auto_watermark_interval())
print("job parameters", sorted(config.get_global_job_parameters().items()))
print("object reuse", config.is_object_reuse_enabled())
config.disable_object_reuse()
print("object reuse after disable", config.is_object_reuse_enabled())
print("closure cleaner", config.is_closure_cleaner_enabled())
env.set_parallelism(1)
print("collected", list(env.from_collection([1, 2], type_info=Types.INT()).execute_and_collect()))
