"""Keyed rolling word count, written against PyFlink's DataStream API.

Run it in-process:            python examples/wordcount.py
Run it on a local cluster:    millstream run --parallelism 2 examples/wordcount.py
"""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

TEXT = [
    "to be or not to be that is the question",
    "whether tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune",
    "or to take arms against a sea of troubles",
]


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    counts = (
        env.from_collection(TEXT, type_info=Types.STRING())
        .flat_map(lambda line: [(w, 1) for w in line.split()], output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda pair: pair[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    counts.print()
    env.execute("wordcount")


if __name__ == "__main__":
    main()
