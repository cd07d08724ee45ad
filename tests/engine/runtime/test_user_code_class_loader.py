"""Classes defined in a program travel by value in its user code; in another process (here: this
test process, whose ``__main__`` is not the program) the UserCodeClassLoader finds them by name for
the data plane, checkpoints and savepoints. The user code is pickled by a real separate process,
as a client does."""
from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

from millstream.engine.runtime.io.serialization import RECORDS, MsgpackSerializer, PickleSerializer
from millstream.engine.runtime.user_code_class_loader import UnknownUserClass, load_user_code

PROGRAM = textwrap.dedent(
    """
    import enum, sys, cloudpickle
    from dataclasses import dataclass, field

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
        tags: list = field(default_factory=list)
        pair: tuple = ()
        level: Level = Level.LOW

    class Tally:
        def __init__(self, total):
            self.total = total

        def __eq__(self, other):
            return type(other) is type(self) and other.total == self.total

    @dataclass(slots=True)
    class Slotted:
        x: int

    class Graph:  # stands for the StreamGraph: user code the task gets
        pass

    g = Graph()
    g.classes = {c.__name__: c for c in (Level, Account, Payment, Tally, Slotted)}
    g.make = lambda i: Payment(Account("b%d" % (i % 2), i), i * 10, ["t", i], (i, "p"), Level.HIGH if i % 2 else Level.LOW)
    sys.stdout.buffer.write(cloudpickle.dumps(g))
    """
)


def _user_code() -> bytes:
    """A program's user code, pickled by a program run as its own process (a new submission each call)."""
    return subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, check=True).stdout


@pytest.fixture(scope="module")
def code() -> bytes:
    return _user_code()


def _in_task(graph: Any, fn) -> Any:
    """Run ``fn`` on a thread that activated the graph's loader, as StreamTask.run does."""
    box: dict[str, Any] = {}

    def run() -> None:
        graph.class_loader.activate()
        try:
            box["value"] = fn()
        except BaseException as e:  # handed back to the test
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_the_program_classes_are_registered_by_name(code: bytes) -> None:
    graph = load_user_code(code)
    assert set(graph.class_loader.names) >= {"__main__.Account", "__main__.Payment", "__main__.Tally", "__main__.Level"}
    assert graph.class_loader.resolve("__main__.Payment") is graph.classes["Payment"]
    # not findable as __main__.Payment in this process, which is what plain pickle would need
    assert getattr(sys.modules["__main__"], "Payment", None) is not graph.classes["Payment"]


def test_records_of_program_classes_cross_the_data_plane_with_exact_field_types(code: bytes) -> None:
    graph = load_user_code(code)
    payments = [graph.make(i) for i in range(5)]
    mixed = [payments[0], ("a", 1), graph.classes["Tally"](3), payments[1]]  # not one class: per record
    ser = MsgpackSerializer()

    def roundtrip() -> tuple[Any, Any]:
        return ser.decode(ser.encode(RECORDS, payments))[1], ser.decode(ser.encode(RECORDS, mixed))[1]

    back, back_mixed = _in_task(graph, roundtrip)
    assert list(back) == payments and list(back_mixed) == mixed
    first = back[1]
    assert type(first) is graph.classes["Payment"] and type(first.account) is graph.classes["Account"]
    assert type(first.tags) is list and type(first.pair) is tuple and first.level is graph.classes["Level"].HIGH
    assert hash(first.account) == hash(payments[1].account)  # frozen dataclass: usable as a key


def test_a_buffer_of_frozen_dataclass_records_crosses_the_data_plane(code: bytes) -> None:
    graph = load_user_code(code)
    accounts = [graph.classes["Account"]("b", i) for i in range(3)]  # frozen: no `obj.__dict__ = ...`
    ser = MsgpackSerializer()
    back = _in_task(graph, lambda: ser.decode(ser.encode(RECORDS, accounts))[1])
    assert list(back) == accounts and type(back[0]) is graph.classes["Account"]
    assert {hash(a) for a in back} == {hash(a) for a in accounts}


def test_a_buffer_of_one_class_names_it_once(code: bytes) -> None:
    graph = load_user_code(code)
    payments = [graph.make(i) for i in range(200)]
    data = MsgpackSerializer().encode(RECORDS, payments)
    assert data.count(b"__main__.Payment") == 1
    assert data.count(b"__main__.Account") == 200  # nested objects name their class each


def test_state_with_program_classes_pickles_for_checkpoints(code: bytes) -> None:
    graph = load_user_code(code)
    state = {"keyed": {graph.make(1).account: [graph.make(1), graph.classes["Tally"](7)]}, "s": graph.classes["Slotted"](3)}
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)  # what the checkpointer writes
    back = _in_task(graph, lambda: pickle.loads(blob))
    assert back["keyed"] == state["keyed"] and back["s"].x == 3
    assert type(back["s"]) is graph.classes["Slotted"]
    # the whole-buffer pickle serializer too
    ser = PickleSerializer()
    assert list(_in_task(graph, lambda: ser.decode(ser.encode(RECORDS, [graph.make(2)]))[1])) == [graph.make(2)]


def test_a_savepoint_restores_into_a_resubmitted_program(code: bytes) -> None:
    """A new submission rebuilds new class objects (new cloudpickle tracker ids); state written by
    the old ones is found by class name and becomes instances of the new classes."""
    old = load_user_code(code)
    blob = pickle.dumps({"v": old.make(3), "t": old.classes["Tally"](5)}, protocol=pickle.HIGHEST_PROTOCOL)
    new = load_user_code(_user_code())
    assert new.classes["Payment"] is not old.classes["Payment"]
    back = _in_task(new, lambda: pickle.loads(blob))
    assert type(back["v"]) is new.classes["Payment"] and type(back["t"]) is new.classes["Tally"]
    assert back["v"] == new.make(3)


def test_two_jobs_with_same_named_classes_resolve_each_to_its_own(code: bytes) -> None:
    one, two = load_user_code(code), load_user_code(_user_code())
    ser = MsgpackSerializer()
    data = ser.encode(RECORDS, [one.make(1)])
    assert type(_in_task(one, lambda: ser.decode(data)[1][0])) is one.classes["Payment"]
    assert type(_in_task(two, lambda: ser.decode(data)[1][0])) is two.classes["Payment"]


def test_a_record_naming_a_class_the_job_did_not_define_is_refused_without_unpickling(code: bytes) -> None:
    import msgpack

    graph = load_user_code(code)
    forged = msgpack.packb(
        (RECORDS, msgpack.ExtType(7, msgpack.packb(["posix.system", [{"x": 1}]])), None), use_bin_type=True
    )
    with pytest.raises(UnknownUserClass, match="posix.system is not defined by the job's user code"):
        _in_task(graph, lambda: MsgpackSerializer().decode(forged))


def test_classes_are_released_with_their_last_loader(code: bytes) -> None:
    import copyreg
    import gc

    from millstream.engine.runtime import user_code_class_loader as ucl

    graph = load_user_code(code)
    payment = graph.classes["Payment"]
    assert payment in copyreg.dispatch_table and ucl.plain_class_name(payment) == "__main__.Payment"
    del graph
    gc.collect()
    assert payment not in copyreg.dispatch_table and ucl.plain_class_name(payment) is None


def test_a_loader_the_gc_finalizes_while_another_registers_does_not_hang_it(code: bytes) -> None:
    """A dead job's user code is in reference cycles, so the cyclic GC finalizes its loader at any
    allocation: also inside the next job's registration, on the same thread, with the registry's
    lock held. A slot once hung there for good deploying its next job."""
    import gc

    from millstream.engine.runtime import user_code_class_loader as ucl

    old = load_user_code(code)
    old_payment = old.classes["Payment"]
    old.itself = old  # a cycle, as cloudpickled code has: only the cyclic GC frees it
    gc.collect()
    gc.disable()  # the dead loader waits for the collection forced below, inside _register
    try:
        del old
        real_is_plain = ucl._is_plain

        def is_plain_collecting(cls: type) -> bool:
            gc.collect()  # what an allocation here may trigger
            return real_is_plain(cls)

        ucl._is_plain = is_plain_collecting
        box: dict[str, Any] = {}
        t = threading.Thread(target=lambda: box.setdefault("graph", load_user_code(_user_code())), daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "registering a job's classes hung on a loader finalized inside it"
    finally:
        ucl._is_plain = real_is_plain
        gc.enable()
    new_payment = box["graph"].classes["Payment"]
    assert ucl.plain_class_name(new_payment) == "__main__.Payment"
    gc.collect()
    assert ucl.plain_class_name(old_payment) is None  # the dead loader's classes were released
