"""env.get_config(): an ExecutionConfig whose global job parameters reach RuntimeContext.get_job_parameter."""
from pyflink.common import ExecutionConfig, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction, RuntimeContext


class Tag(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.prefix = runtime_context.get_job_parameter("prefix", "none")
        self.missing = runtime_context.get_job_parameter("missing", "default")

    def map(self, value):
        return f"{self.prefix}-{value}-{self.missing}"


env = StreamExecutionEnvironment.get_execution_environment()
config = env.get_config()
print("is ExecutionConfig:", isinstance(config, ExecutionConfig))
print("auto watermark interval:", config.get_auto_watermark_interval())
config.set_auto_watermark_interval(50)
print("auto watermark interval now:", config.get_auto_watermark_interval())
print("object reuse:", config.is_object_reuse_enabled())
config.enable_object_reuse()
print("object reuse now:", config.is_object_reuse_enabled())
print("closure cleaner:", config.is_closure_cleaner_enabled())
print("auto uids:", config.has_auto_generated_uids_enabled())
config.set_parallelism(1)
print("parallelism:", config.get_parallelism(), env.get_parallelism())
config.set_global_job_parameters({"prefix": "p", "n": 3})
print("job parameters:", sorted(config.get_global_job_parameters().items()))
env.from_collection(["a", "b"], type_info=Types.STRING()).map(Tag(), output_type=Types.STRING()).print()
env.execute("execution_config")
