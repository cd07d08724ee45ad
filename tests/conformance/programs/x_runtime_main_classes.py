"""Records that are instances of classes defined in the program (issue 12, item 3): a dataclass,
a plain class and an Enum cross the network, are keyed by a frozen dataclass, and sit in keyed
ValueState and ListState, at parallelism 2."""
import enum
from dataclasses import dataclass

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@dataclass(frozen=True)
class Account:
    bank: str
    number: int


@dataclass
class Payment:
    account: Account
    amount: int
    tags: list
    level: Level


class Balance:
    def __init__(self, total, count):
        self.total = total
        self.count = count

    def __repr__(self):
        return f"Balance({self.total}, {self.count})"


class Tracker(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.balance = runtime_context.get_state(ValueStateDescriptor("balance", Types.PICKLED_BYTE_ARRAY()))
        self.history = runtime_context.get_list_state(ListStateDescriptor("history", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        b = self.balance.value() or Balance(0, 0)
        b = Balance(b.total + value.amount, b.count + 1)
        self.balance.update(b)
        self.history.add(value)
        key = ctx.get_current_key()
        last = [p.amount for p in self.history.get()]
        yield (key, b, last, type(value).__name__, value.level.name, value.tags)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
raw = [("x", 1, 5), ("y", 2, 7), ("x", 1, 3), ("x", 2, 1), ("y", 2, 10), ("x", 1, 8)]
payments = env.from_collection(raw).map(
    lambda r: Payment(Account(r[0], r[1]), r[2], [r[0]] * r[1], Level.HIGH if r[2] > 5 else Level.LOW)
).set_parallelism(1)  # one upstream subtask: each key's payments arrive in order
tracked = payments.key_by(lambda p: p.account).process(Tracker())
for key, balance, last, kind, level, tags in tracked.execute_and_collect():
    print(key, balance, last, kind, level, tags, isinstance(key, Account))
