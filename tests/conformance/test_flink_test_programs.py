"""The extraction behind ``record_pyflink.py --flink-tests``, on a small test module of our own
written the way Apache Flink's PyFlink tests are (mixin test class, unittest bases, the Java test
sink, JVM-only configuration, a Java-gateway test). The generated programs run here under Millstream."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conformance.flink_test_programs import extract_programs, parse_test_bases
from tests.conformance.flink_tests import (
    DIFFERS,
    FAILS_OURS,
    IDENTICAL,
    PRINT_FORM,
    VARIES,
    classify,
    print_form_key,
)
from tests.conformance.harness import REPO, RunResult

BASES = textwrap.dedent('''
    import unittest

    class PyFlinkTestCase(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            cls.tempdir = "/tmp"

    class PyFlinkITTestCase(PyFlinkTestCase):
        @classmethod
        def setUpClass(cls):
            cls.env = StreamExecutionEnvironment(get_gateway().jvm.TestStreamEnvironment(2))

    class PyFlinkStreamingTestCase(PyFlinkITTestCase):
        @classmethod
        def setUpClass(cls):
            super().setUpClass()
            cls.env.set_parallelism(2)
            cls.env.set_runtime_mode(RuntimeExecutionMode.STREAMING)

    class PyFlinkBatchTestCase(PyFlinkITTestCase):
        @classmethod
        def setUpClass(cls):
            super().setUpClass()
            cls.env.set_parallelism(3)
            cls.env.set_runtime_mode(RuntimeExecutionMode.BATCH)
''')

MODULE = textwrap.dedent('''
    import pytest
    from pyflink.common import Configuration
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import TimeCharacteristic, StreamExecutionEnvironment
    from pyflink.datastream.functions import MapFunction, KeySelector
    from pyflink.datastream.tests.test_util import DataStreamTestSinkFunction
    from pyflink.java_gateway import get_gateway
    from pyflink.testing.test_case_utils import PyFlinkStreamingTestCase, PyFlinkBatchTestCase
    from pyflink.util.java_utils import get_j_env_configuration


    class SampleTests(object):

        def setUp(self):
            super().setUp()
            self.test_sink = DataStreamTestSinkFunction()

        def assert_equals_sorted(self, expected, actual):
            expected.sort()
            actual.sort()
            self.assertEqual(expected, actual)

        def test_map(self):
            config = Configuration(j_configuration=get_j_env_configuration(self.env._j_stream_execution_environment))
            config.set_integer("python.fn-execution.bundle.size", 1)
            self.env.set_stream_time_characteristic(TimeCharacteristic.EventTime)
            ds = self.env.from_collection([('a', 1), ('b', 2)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
            side = DataStreamTestSinkFunction()
            ds.map(Twice(), output_type=Types.TUPLE([Types.STRING(), Types.INT()])).add_sink(self.test_sink)
            ds.key_by(FirstField()).map(lambda t: t[0], output_type=Types.STRING()).add_sink(side)
            self.env.execute('test_map')
            self.assert_equals_sorted(['(a,2)', '(b,4)'], self.test_sink.get_results())
            self.assertEqual(2, self.env.get_parallelism())
            with self.assertRaises(Exception):
                ds.key_by(FirstField()).name("keyed")

        def test_java_graph(self):
            self.env._j_stream_execution_environment.getStreamGraph(True)


    @pytest.mark.skipif(False, reason="")
    class StreamingSampleTests(SampleTests, PyFlinkStreamingTestCase):
        pass


    class BatchSampleTests(SampleTests, PyFlinkBatchTestCase):
        def test_batch_only(self):
            self.assertEqual(3, self.env.get_parallelism())


    class Twice(MapFunction):
        def map(self, value):
            return value[0], value[1] * 2


    class FirstField(KeySelector):
        def get_key(self, value):
            return value[0]


    class NeverUsed(MapFunction):
        pass
''')


def _programs():
    return {p.method: p for p in extract_programs(MODULE, "test_sample", parse_test_bases(BASES))}


def test_each_test_method_definition_becomes_one_program_in_its_first_concrete_class() -> None:
    programs = _programs()
    assert sorted(programs) == ["test_batch_only", "test_java_graph", "test_map"]
    assert programs["test_map"].setup_class == "StreamingSampleTests"  # first in file order
    assert programs["test_batch_only"].setup_class == "BatchSampleTests"
    assert programs["test_map"].name == "test_sample.SampleTests.test_map"


def test_java_gateway_bodies_are_excluded_with_a_reason() -> None:
    p = _programs()["test_java_graph"]
    assert p.source is None and "Java gateway" in (p.excluded or "")


def test_program_swaps_the_java_sink_for_print_and_drops_jvm_only_statements() -> None:
    p = _programs()["test_map"]
    src = p.source or ""
    assert p.dropped_statements == 3  # the config pair and set_stream_time_characteristic
    assert "add_sink" not in src and src.count(".print()") == 2
    assert "get_j_env_configuration" not in src and "TimeCharacteristic" not in src
    assert "pytest" not in src and "NeverUsed" not in src  # only what the body reaches
    assert "class Twice" in src and "class FirstField" in src
    assert "_case.env.set_parallelism(2)" in src and "RuntimeExecutionMode.STREAMING" in src


def test_generated_programs_run_under_millstream(tmp_path: Path) -> None:
    programs = _programs()
    out = {}
    for name in ("test_map", "test_batch_only"):
        path = tmp_path / f"{name}.py"
        path.write_text(programs[name].source or "")
        r = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr[-2000:]
        out[name] = r.stdout.splitlines()
    records = sorted(line.split("> ", 1)[1] for line in out["test_map"] if ">" in line)
    assert records == ["(a,2)", "(b,4)", "a", "b"]
    # the sink results are printed, so only the assertions on real values report
    assert [line for line in out["test_map"] if ">" not in line] == ["assertEqual: ok", "assertRaises: ok"]
    assert out["test_batch_only"] == ["assertEqual: ok"]


def test_classify() -> None:
    flink = RunResult(0, "1> (a,15)\n2> +I[b, 2]\n", "")
    assert classify(flink, RunResult(0, "2> +I[b, 2]\n1> (a,15)\n", "")).category == IDENTICAL
    assert classify(flink, RunResult(0, "('a', 15)\nRow('b', 2)\n", "")).category == PRINT_FORM
    moved = classify(flink, RunResult(0, "2> (a,15)\n2> +I[b, 2]\n", ""))
    assert moved.category == PRINT_FORM and moved.detail.startswith("only the subtask prefixes differ")
    assert classify(flink, RunResult(0, "1> (a,16)\n2> +I[b, 2]\n", "")).category == DIFFERS
    assert classify(flink, RunResult(1, "", "ValueError: boom")).category == FAILS_OURS
    assert print_form_key("12> Row(f0='x', f1=Decimal('3'))") == "x,3"


def test_classify_tells_pyflink_variation_from_ours() -> None:
    """Prefixes that differ from PyFlink's first run count as PyFlink's own variation only when
    PyFlink's runs disagree among themselves; a record PyFlink never printed still differs."""
    run1 = RunResult(0, "1> 4\n2> 5\n", "")
    run2 = RunResult(0, "2> 4\n1> 5\n", "")
    steady = [run1, RunResult(0, "1> 4\n2> 5\n", "")]
    ours = RunResult(0, "2> 4\n1> 5\n", "")
    assert classify(steady, ours).category == PRINT_FORM  # PyFlink is consistent: the prefixes are ours
    varied = classify([run1, run2], ours)
    assert varied.category == VARIES
    assert "2 PyFlink runs printed 2 different outputs" in varied.detail and "PyFlink run 2" in varied.detail
    # Prefixes no PyFlink run printed, same records: still PyFlink's variation.
    both_on_one = classify([run1, run2], RunResult(0, "1> 4\n1> 5\n", ""))
    assert both_on_one.category == VARIES and "same records" in both_on_one.detail
    assert classify([run1, run2], RunResult(0, "1> 4\n2> 6\n", "")).category == DIFFERS
    # A timing-dependent program: PyFlink's runs differ in a record, and ours is one of them.
    early = RunResult(0, "wm 5\nx\n", "")
    late = RunResult(0, "wm MIN\nx\n", "")
    assert classify([early, late], RunResult(0, "x\nwm MIN\n", "")).category == VARIES
    assert classify([early, late], RunResult(0, "wm 7\nx\n", "")).category == DIFFERS
