"""State written before Millstream's packages moved under ``millstream.`` names its classes by the old
module paths (``TimeWindow`` as a class of the top-level package ``engine``); it must still load,
into the current classes.

OLD_STATE is what ``pickle.dumps`` made of a few engine objects when the packages were still the
top-level ``engine``/``backend``/``migrations`` (kept as hex, so the module paths in it stay the
old ones whatever is renamed in this tree)."""
from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

from millstream.engine.common.typeinfo import TupleTypeInfo, Types
from millstream.engine.windowing.windows import GlobalWindow, TimeWindow

#: the old name of the windows module, spelt so that the renaming script leaves it as it is
OLD_WINDOWS = ".".join(["engine", "windowing", "windows"])
OLD_STATE = bytes.fromhex(
    "80059512010000000000007d94288c0177948c18656e67696e652e77696e646f77696e672e77696e646f7773948c0a54696d6557696e646f779493942981947d94288c057374617274944b008c03656e64944de80375628c01679468028c0c476c6f62616c57696e646f779493942981948c0174948c16656e67696e652e636f6d6d6f6e2e74797065696e666f948c0d5475706c6554797065496e666f9493942981947d948c0c5f6669656c645f7479706573945d9428680e8c0d426173696354797065496e666f9493942981947d948c0b5f62617369635f7479706594680e8c094261736963547970659493948c06537472696e679485945294736268162981947d946819681b8c07496e746567657294859452947362657362752e"
)


def test_state_pickled_under_the_old_module_names_loads_into_the_current_classes() -> None:
    state = pickle.loads(OLD_STATE)
    assert type(state["w"]) is TimeWindow and state["w"] == TimeWindow(0, 1000)
    assert type(state["g"]) is GlobalWindow
    assert type(state["t"]) is TupleTypeInfo and state["t"] == Types.TUPLE([Types.STRING(), Types.INT()])


def test_an_old_name_is_the_same_module_object_not_a_second_copy() -> None:
    old = importlib.import_module(OLD_WINDOWS)
    assert old is sys.modules[TimeWindow.__module__]
    assert old.__spec__.name == TimeWindow.__module__  # the module keeps its own name


def test_old_state_loads_in_a_fresh_interpreter_outside_the_source_tree(tmp_path) -> None:
    """A TaskManager-like process whose path has no source tree, so an ``engine`` directory is found
    nowhere: only the alias answers the old name. (Every Millstream process imports the engine
    before it reads state; that import installs the alias.)"""
    blob = tmp_path / "state.pickle"
    blob.write_bytes(OLD_STATE)
    probe = (
        "import pickle, sys; from millstream.engine import compat; state = pickle.load(open(sys.argv[1], 'rb')); "
        "print(type(state['w']).__module__, type(state['t']).__module__)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(blob)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [TimeWindow.__module__, TupleTypeInfo.__module__]
