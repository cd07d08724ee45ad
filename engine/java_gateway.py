"""``pyflink.java_gateway``: PyFlink's door to the JVM through Py4J, which Millstream does not have.

PyFlink runs its Python API on top of a JVM and ``get_gateway()`` hands out the Py4J gateway to
it; programs and tests use it to reach Java classes directly (``get_gateway().jvm.org.apache...``).
Millstream runs no JVM, so the module exists (a program that imports it still loads) and using the
gateway raises NotSupportedError saying what to use instead.
"""
from __future__ import annotations

from millstream.engine.compat.unsupported import declare_unsupported, unsupported_function

__all__ = [
    "PythonFunctionFactory",
    "Watchdog",
    "get_gateway",
    "import_flink_view",
    "is_launch_gateway_disabled",
    "launch_gateway",
]

_NO_JVM = "it is PyFlink's Py4J link to Flink's JVM, and Millstream runs no JVM (its runtime is Python)"
_INSTEAD = (
    "the Python API itself (StreamExecutionEnvironment, DataStream, the connectors of "
    "pyflink.datastream.connectors), and print() or execute_and_collect() where a test reads a Java sink"
)

get_gateway = unsupported_function("get_gateway", __name__, _NO_JVM, _INSTEAD)
launch_gateway = unsupported_function("launch_gateway", __name__, _NO_JVM, _INSTEAD)
import_flink_view = unsupported_function("import_flink_view", __name__, _NO_JVM, _INSTEAD)


def is_launch_gateway_disabled() -> bool:
    """True: Millstream never launches a Java gateway (PyFlink asks this before it launches one)."""
    return True


# The Python objects PyFlink registers with the JVM for it to call back; without a JVM, no caller.
declare_unsupported(globals(), ["PythonFunctionFactory", "Watchdog"], why=_NO_JVM, instead=_INSTEAD)
