"""Turn the test methods of Apache Flink's own PyFlink test modules into standalone programs.

Pure text-to-text: given the source of a module such as ``pyflink/datastream/tests/test_data_stream.py``
(read at measure time from wherever the user has it, never committed here) and of PyFlink's
``pyflink/testing/test_case_utils.py``, ``extract_programs`` returns one program per test method
definition. Each program builds the environment the test class's setUp chain builds (parallelism and
runtime mode), runs the method body with the Java ``DataStreamTestSinkFunction`` swapped for
``print()``, and prints one line per assertion (``assertEqual: ok`` or what failed), so the same text
can run under real PyFlink and under Millstream and their outputs can be compared.

Bodies that need the Table API, an external service or PyFlink's Java gateway come back with an
``excluded`` reason instead of a program. Statements that only tune the JVM through the gateway
(``get_j_env_configuration(...)`` and the calls on its result) are dropped and counted.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

SINK_CLASS = "DataStreamTestSinkFunction"
SETUP_METHODS = ("setUpClass", "setUp")
SKIPPED_METHODS = ("setUp", "setUpClass", "tearDown", "tearDownClass")
# Imports a generated program never keeps: the Java sink, the unittest bases, pytest (only the
# test classes' skip markers use it; PyFlink's venv does not have it).
DROPPED_IMPORT_MODULES = ("pyflink.datastream.tests", "pyflink.testing", "pytest")
# Identifiers (names, attributes, imported modules) that mark what a body needs; a marker ending
# in "*" matches as a prefix, others exactly; SERVICE_MARKERS match anywhere in an identifier.
JVM_CONFIG_MARKERS = ("get_j_env_configuration",)
TABLE_MARKERS = ("pyflink.table*", "StreamTableEnvironment", "TableEnvironment", "t_env", "DataTypes")
SERVICE_MARKERS = ("Kafka", "Pulsar", "Elasticsearch", "Kinesis", "RMQ", "Jdbc", "Cassandra")
REMOVED_IN_2 = ("set_stream_time_characteristic",)
GATEWAY_MARKERS = ("get_gateway", "py4j*", "invoke_java_object_method", "_j_*", "jvm", "Py4JJavaError")

# The scaffolding every program shares (ours): unittest-style assertions that print their outcome,
# and a stand-in for the Java test sink whose results are the lines print() wrote.
HARNESS = '''
import tempfile as _tempfile


_SINK_RECORDS = object()  # stands for the records a replaced test sink printed


class _Printed(list):
    """What a replaced test sink "collected": its records went to print(), so assertions on it
    (or on a list built from it) are skipped; the printed lines are compared instead."""

    def __init__(self):
        super().__init__([_SINK_RECORDS])


class _PrintedSink:
    def get_results(self, *args, **kwargs):
        return _Printed()

    def clear(self):
        pass


def _involves_printed(*values):
    return any(isinstance(v, list) and any(x is _SINK_RECORDS for x in v) for v in values)


class _AssertRaises:
    def __init__(self, expected):
        self.expected = expected

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            print("assertRaises: FAILED: nothing was raised")
            return False
        if issubclass(exc_type, self.expected):
            print("assertRaises: ok")
            return True
        return False


class _Harness:
    """The parts of unittest.TestCase the bodies use, printing each outcome."""

    def __init__(self):
        self.tempdir = _tempfile.mkdtemp()
        self.test_sink = _PrintedSink()

    def _check(self, name, ok, detail):
        print(name + (": ok" if ok else ": FAILED: " + detail))

    def assertEqual(self, first, second, msg=None):
        if not _involves_printed(first, second):
            self._check("assertEqual", first == second, "%r != %r" % (first, second))

    def assertNotEqual(self, first, second, msg=None):
        if not _involves_printed(first, second):
            self._check("assertNotEqual", first != second, "%r == %r" % (first, second))

    def assertTrue(self, value, msg=None):
        self._check("assertTrue", bool(value), "%r is not true" % (value,))

    def assertFalse(self, value, msg=None):
        self._check("assertFalse", not value, "%r is not false" % (value,))

    def assertIsNone(self, value, msg=None):
        self._check("assertIsNone", value is None, "%r is not None" % (value,))

    def assertIsNotNone(self, value, msg=None):
        self._check("assertIsNotNone", value is not None, "value is None")

    def assertIn(self, member, container, msg=None):
        if not _involves_printed(container):
            self._check("assertIn", member in container, "%r not in %r" % (member, container))

    def assertIsInstance(self, value, cls, msg=None):
        self._check("assertIsInstance", isinstance(value, cls), "%r is a %s" % (value, type(value).__name__))

    def assertRaises(self, expected, *args, **kwargs):
        if args:
            with _AssertRaises(expected):
                args[0](*args[1:], **kwargs)
            return None
        return _AssertRaises(expected)
'''


# Python 3.12 added type_params to def/class nodes; ast.unparse needs it there and 3.11 lacks it.
_TYPE_PARAMS: dict = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}


@dataclass(frozen=True)
class FlinkTestProgram:
    """One test method of an upstream test module, as a program or as the reason it is left out."""

    module: str  # e.g. "test_data_stream"
    test_class: str  # the class defining the method
    method: str
    source: str | None  # the standalone program; None when excluded
    excluded: str | None = None
    setup_class: str = ""  # the concrete test class whose setUp chain built the environment
    dropped_statements: int = 0  # JVM-only configuration statements left out

    @property
    def name(self) -> str:
        return f"{self.module}.{self.test_class}.{self.method}"


@dataclass
class _ClassInfo:
    node: ast.ClassDef
    bases: list[str]
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for b in node.bases:
        if isinstance(b, ast.Name):
            names.append(b.id)
        elif isinstance(b, ast.Attribute):
            names.append(b.attr)
        elif isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name):
            names.append(b.value.id)  # Generic[...] style bases
    return names


def _classes(tree: ast.Module) -> dict[str, _ClassInfo]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            info = _ClassInfo(node, _base_names(node))
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.methods[item.name] = item  # type: ignore[assignment]
            found[node.name] = info
    return found


def _mro(name: str, classes: dict[str, _ClassInfo]) -> list[str]:
    """The C3 linearisation of ``name`` over the classes known here (unknown bases become leaves)."""
    built: dict[str, type] = {}

    def build(n: str) -> type:
        if n not in built:
            if n == "object":
                built[n] = object
            else:
                bases = tuple(build(b) for b in classes[n].bases) if n in classes else ()
                built[n] = type(n, bases or (object,), {})
        return built[n]

    return [c.__name__ for c in build(name).__mro__ if c is not object]


def _is_test_class(name: str, classes: dict[str, _ClassInfo]) -> bool:
    return any(m.startswith("test") for c in _mro(name, classes) if c in classes for m in classes[c].methods)


def _concrete(name: str, classes: dict[str, _ClassInfo], bases: dict[str, _ClassInfo]) -> bool:
    """A class unittest would run: it derives from a TestCase base of test_case_utils."""
    return any(c in bases for c in _mro(name, {**bases, **classes}))


def _names_used(nodes: list[ast.AST]) -> set[str]:
    used = set()
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name):
                used.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                root = sub
                while isinstance(root, ast.Attribute):
                    root = root.value  # type: ignore[assignment]
                if isinstance(root, ast.Name):
                    used.add(root.id)
    return used


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _identifiers(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.ImportFrom):
            found.add(sub.module or "")
            found.update(a.name for a in sub.names)
        elif isinstance(sub, ast.Import):
            found.update(a.name for a in sub.names)
        elif isinstance(sub, ast.keyword) and sub.arg:
            found.add(sub.arg)
    return found


def _mentions(node: ast.AST, markers: tuple[str, ...], anywhere: bool = False) -> bool:
    for ident in _identifiers(node):
        for m in markers:
            if anywhere and m in ident:
                return True
            if (m.endswith("*") and ident.startswith(m[:-1])) or ident == m:
                return True
    return False


def _env_setup(concrete: str, classes: dict[str, _ClassInfo], bases: dict[str, _ClassInfo]) -> list[str]:
    """The environment statements of the setUpClass/setUp chain, base first, as ``_case.env...``
    lines: ``X.env = ...`` (a gateway-built environment becomes ``get_execution_environment()``)
    and ``X.env.<method>(...)`` calls that need no gateway."""
    every = {**bases, **classes}
    lines: list[str] = []
    for cls in reversed(_mro(concrete, every)):
        info = every.get(cls)
        if info is None:
            continue
        for method in SETUP_METHODS:
            fn = info.methods.get(method)
            if fn is None:
                continue
            for stmt in fn.body:
                if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Attribute) and stmt.targets[0].attr == "env"):
                    lines = [line for line in lines if not line.startswith("_case.env.")]  # a new env
                    lines.append("_case.env = StreamExecutionEnvironment.get_execution_environment()")
                elif (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                      and isinstance(stmt.value.func, ast.Attribute)
                      and isinstance(stmt.value.func.value, ast.Attribute)
                      and stmt.value.func.value.attr == "env"
                      and not _mentions(stmt, GATEWAY_MARKERS)):
                    call = stmt.value
                    lines.append(f"_case.env.{call.func.attr}({', '.join(ast.unparse(a) for a in call.args)})")
    if not any(line.startswith("_case.env =") for line in lines):
        lines.insert(0, "_case.env = StreamExecutionEnvironment.get_execution_environment()")
    return lines


class _SinkSwap(ast.NodeTransformer):
    """``X.add_sink(<test sink>)`` becomes ``X.print()``; ``DataStreamTestSinkFunction()`` becomes
    the printing stand-in, so ``get_results`` still answers."""

    def __init__(self) -> None:
        self.sink_names: set[str] = set()
        self.swapped = 0

    def _is_test_sink(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "test_sink":
            return True
        if isinstance(node, ast.Name) and node.id in self.sink_names:
            return True
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == SINK_CLASS

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and node.value.func.id == SINK_CLASS:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.sink_names.add(t.id)
            node.value = ast.Call(func=ast.Name("_PrintedSink", ast.Load()), args=[], keywords=[])
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "add_sink"
                and len(node.args) == 1 and self._is_test_sink(node.args[0])):
            self.swapped += 1
            return ast.Call(func=ast.Attribute(node.func.value, "print", ast.Load()), args=[], keywords=[])
        return node


def _drop_jvm_config(body: list[ast.stmt]) -> tuple[list[ast.stmt], int]:
    """Leave out statements that only configure the JVM through the gateway, and those using what
    they bound (``config = Configuration(j_configuration=get_j_env_configuration(...))`` and
    ``config.set_integer(...)``), in-body imports of pyflink.util.java_utils, and calls Flink 2.0
    removed as no-ops (``set_stream_time_characteristic``: event time is the default since 1.12)."""
    bound: set[str] = set()
    kept, dropped = [], 0
    for stmt in body:
        is_import = isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("pyflink.util.java_utils")
        if is_import or _mentions(stmt, JVM_CONFIG_MARKERS) or _mentions(stmt, REMOVED_IN_2) or (_names_used([stmt]) & bound):
            bound |= _defined_names(stmt) - {"get_j_env_configuration"} if not is_import else set()
            dropped += 1
            continue
        kept.append(stmt)
    return kept, dropped


def _exclusion(nodes: list[ast.AST]) -> str | None:
    for n in nodes:
        if _mentions(n, TABLE_MARKERS):
            return "needs the Table API"
    for n in nodes:
        if _mentions(n, SERVICE_MARKERS, anywhere=True):
            return "needs an external service (Kafka, Pulsar, Elasticsearch...)"
    for n in nodes:
        if _mentions(n, GATEWAY_MARKERS):
            return "needs PyFlink's Java gateway (Java classes or the Java stream graph)"
    return None


def parse_test_bases(test_case_utils_source: str) -> dict[str, _ClassInfo]:
    """The unittest base classes of PyFlink's test_case_utils (their setUpClass builds the env)."""
    return _classes(ast.parse(test_case_utils_source))


def extract_programs(source: str, module: str, bases: dict[str, _ClassInfo]) -> list[FlinkTestProgram]:
    """One FlinkTestProgram per test method defined in ``source`` (each definition once, built in
    the environment of the first concrete class, in file order, that runs it)."""
    tree = ast.parse(source)
    classes = _classes(tree)
    test_classes = {n for n in classes if _is_test_class(n, classes) or _concrete(n, classes, bases)}
    support = [
        node for node in tree.body
        if not (isinstance(node, ast.ClassDef) and node.name in test_classes)
        and not (isinstance(node, (ast.Import, ast.ImportFrom)) and _dropped_import(node))
        and not isinstance(node, (ast.Expr,))  # the module docstring
    ]
    chosen: dict[tuple[str, str], str] = {}  # (defining class, method) -> concrete class
    for name in classes:
        if name not in test_classes or not _concrete(name, classes, bases):
            continue
        seen: set[str] = set()
        for cls in _mro(name, classes):
            for method in classes[cls].methods if cls in classes else ():
                if method.startswith("test") and method not in seen:
                    seen.add(method)
                    chosen.setdefault((cls, method), name)
    programs = []
    for cls, info in classes.items():  # file order
        for method, fn in info.methods.items():
            if not method.startswith("test"):
                continue
            concrete = chosen.get((cls, method))
            if concrete is None:
                programs.append(FlinkTestProgram(module, cls, method, None, "no concrete test class runs it"))
                continue
            programs.append(_program(module, cls, method, fn, concrete, classes, bases, support))
    return programs


def _dropped_import(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    return any(m == d or m.startswith(d + ".") for m in modules for d in DROPPED_IMPORT_MODULES)


def _program(module: str, cls: str, method: str, fn: ast.FunctionDef, concrete: str,
             classes: dict[str, _ClassInfo], bases: dict[str, _ClassInfo], support: list[ast.stmt]) -> FlinkTestProgram:
    body, dropped = _drop_jvm_config(list(fn.body))
    swap = _SinkSwap()
    body = [swap.visit(stmt) for stmt in body]
    # Helper methods of the class chain (assert_equals_sorted...), most derived first.
    helpers: dict[str, ast.FunctionDef] = {}
    for c in _mro(concrete, classes):
        for name, m in classes[c].methods.items() if c in classes else ():
            if not name.startswith("test") and name not in SKIPPED_METHODS and name not in helpers:
                helpers[name] = m
    excluded = _exclusion(body)
    if excluded:
        return FlinkTestProgram(module, cls, method, None, excluded, concrete, dropped)
    # Module-level support code the body reaches, directly or through other support code.
    needed = _names_used(body) | _names_used(list(helpers.values())) | {"StreamExecutionEnvironment"}
    included: list[ast.stmt] = []
    changed = True
    while changed:
        changed = False
        for node in support:
            if node not in included and _defined_names(node) & needed:
                included.append(node)
                needed |= _names_used([node])
                changed = True
    included.sort(key=support.index)
    body_fn = ast.FunctionDef(
        name="_test_body", args=ast.arguments(posonlyargs=[], args=[ast.arg("self")], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body or [ast.Pass()], decorator_list=[], returns=None, **_TYPE_PARAMS,
    )
    case_cls = ast.ClassDef(name="_TestCase", bases=[ast.Name("_Harness", ast.Load())], keywords=[],
                            body=list(helpers.values()) or [ast.Pass()], decorator_list=[], **_TYPE_PARAMS)
    # Imports keep only the names the program uses (PyFlink 2 no longer has some the module imports).
    imports = []
    for n in included:
        if isinstance(n, ast.ImportFrom):
            names = [a for a in n.names if (a.asname or a.name) in needed]
            imports.append(ast.ImportFrom(module=n.module, names=names, level=n.level))
        elif isinstance(n, ast.Import):
            imports.append(n)
    defs = [n for n in included if not isinstance(n, (ast.Import, ast.ImportFrom))]
    parts = [
        f"# {module}.{cls}.{method} from Apache Flink's PyFlink tests (Apache License 2.0), made standalone",
        f"# by tests/conformance/flink_test_programs.py for measuring only; environment of {concrete};",
        f"# {dropped} JVM-only or removed-in-Flink-2 statements left out.",
        "from pyflink.datastream import StreamExecutionEnvironment, RuntimeExecutionMode",
        *(ast.unparse(n) for n in imports),
        HARNESS,
        *(ast.unparse(n) + "\n" for n in defs),
        ast.unparse(ast.fix_missing_locations(case_cls)) + "\n",
        ast.unparse(ast.fix_missing_locations(body_fn)) + "\n",
        "if __name__ == '__main__':",
        "    _case = _TestCase()",
        *("    " + line for line in _env_setup(concrete, classes, bases)),
        "    _test_body(_case)",
        "",
    ]
    return FlinkTestProgram(module, cls, method, "\n".join(parts), None, concrete, dropped)
