"""Side outputs from a ProcessFunction by yielding (OutputTag, value); main and side streams printed."""
from pyflink.common import Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessFunction

odd_tag = OutputTag("odd", Types.INT())
text_tag = OutputTag("text", Types.STRING())


class Split(ProcessFunction):
    def process_element(self, value, ctx):
        if value % 2:
            yield odd_tag, value
            yield text_tag, f"odd {value}"
        else:
            yield value * 100


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
main = env.from_collection([1, 2, 3, 4, 5], type_info=Types.INT()).process(Split(), output_type=Types.INT())
main.print("main")
main.get_side_output(odd_tag).print("odd")
main.get_side_output(text_tag).print("text")
env.execute()
