"""Python files shipped with a job (``add_python_file``): a module, a package and a zip that live
outside the program's directory and are installed nowhere reach the TaskManagers (and the Spark
executors of a BATCH job) through the JobManager, and the job's functions import them there."""
from __future__ import annotations

import textwrap
import zipfile
from pathlib import Path

from tests.integration.cluster import Cluster


def _program(root: Path, text: str) -> Path:
    prog = root / "job" / "program.py"
    prog.parent.mkdir()
    prog.write_text(textwrap.dedent(text))
    return prog


def _ran(res, expected: str) -> None:
    assert res.returncode == 0, res.stderr[-3000:]
    assert expected in res.stdout, res.stdout[-2000:]

PROGRAM = """
import sys
from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

deps = sys.argv[1]
sys.path.insert(0, deps)          # the client imports them from where they are,
sys.path.insert(0, deps + "/lib.zip")
import shout                      # a module,
from tools.fmt import bracket     # a package,
from zipped import twice          # and a module inside a zip

env = StreamExecutionEnvironment.get_execution_environment()
if len(sys.argv) > 2:
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.add_python_file(deps + "/shout.py")  # and ships them with the job
env.add_python_file(deps + "/tools")
env.add_python_file(deps + "/lib.zip")


def late(x):
    import shout as s             # imported only on the TaskManager, at run time
    return s.shout(x)


words = env.from_collection(["a", "b"], type_info=Types.STRING())
out = words.map(shout.shout).map(bracket).map(twice).map(late)
print(sorted(out.execute_and_collect()))
"""


def _deps(root: Path) -> Path:
    deps = root / "elsewhere"
    (deps / "tools").mkdir(parents=True)
    (deps / "shout.py").write_text("def shout(x):\n    return x.upper() + '!'\n")
    (deps / "tools" / "__init__.py").write_text("")
    (deps / "tools" / "fmt.py").write_text("def bracket(x):\n    return '[' + x + ']'\n")
    with zipfile.ZipFile(deps / "lib.zip", "w") as z:
        z.writestr("zipped.py", "def twice(x):\n    return x + x\n")
    return deps


def test_files_added_with_add_python_file_are_importable_on_the_taskmanagers(cluster: Cluster, tmp_path: Path) -> None:
    deps = _deps(tmp_path)
    prog = _program(tmp_path, PROGRAM)
    _ran(cluster.run(prog, str(deps), options=("-p", "2")), "['[A!][A!]!', '[B!][B!]!']")
    # The same program as a BATCH job on Spark: the executors get the files by addPyFile.
    _ran(cluster.run(prog, str(deps), "batch", options=("-p", "2")), "['[A!][A!]!', '[B!][B!]!']")


def test_without_add_python_file_the_taskmanager_cannot_import_them(cluster: Cluster, tmp_path: Path) -> None:
    """What makes the test above mean something: the same program without the three calls fails on
    the cluster with the module's name, since nothing installed it there (nor did the job before it,
    which shipped them to these same TaskManagers: a job's files stay with that job)."""
    deps = _deps(tmp_path)
    without = "\n".join(l for l in textwrap.dedent(PROGRAM).splitlines() if "add_python_file" not in l)
    res = cluster.run(_program(tmp_path, without), str(deps), options=("-p", "2"))
    assert res.returncode != 0
    assert "No module named" in res.stderr + res.stdout


REQUIREMENTS_PROGRAM = """
import sys
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_python_requirements(sys.argv[1], sys.argv[2])


def answer(x):
    import msreqdemo              # installed on the TaskManager from the shipped cache, not here
    return x * msreqdemo.ANSWER


print(sorted(env.from_collection([1, 2], type_info=Types.INT()).map(answer).execute_and_collect()))
"""


def test_requirements_are_installed_on_the_taskmanagers(cluster: Cluster, tmp_path: Path) -> None:
    from tests.engine.runtime.test_python_dependencies import _wheel

    wheels = _wheel(tmp_path)
    (tmp_path / "requirements.txt").write_text("msreqdemo==0.1\n")
    prog = _program(tmp_path, REQUIREMENTS_PROGRAM)
    _ran(cluster.run(prog, str(tmp_path / "requirements.txt"), str(wheels), options=("-p", "2")), "[42, 84]")


ARCHIVE_PROGRAM = """
import sys
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.add_python_archive(sys.argv[1], "model")


def suffix(x):
    with open("model/data/suffix.txt") as f:  # relative to the task's working directory, as in PyFlink
        return x + f.read().strip()


print(sorted(env.from_collection(["a", "b"], type_info=Types.STRING()).map(suffix).execute_and_collect()))
"""


def test_archives_are_extracted_where_the_jobs_functions_run(cluster: Cluster, tmp_path: Path) -> None:
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data/suffix.txt", "-ok\n")
    prog = _program(tmp_path, ARCHIVE_PROGRAM)
    for options in (("-p", "2"), ("--local",)):
        _ran(cluster.run(prog, str(archive), options=options), "['a-ok', 'b-ok']")


PYFS_PROGRAM = """
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

import greet                      # found only through -pyfs: the CLI puts it on the client's path too


def late(x):
    import greet as g             # imported on the TaskManager at run time, from what the job shipped
    return g.hello(x)


env = StreamExecutionEnvironment.get_execution_environment()
print(sorted(env.from_collection(["a", "b"], type_info=Types.STRING()).map(greet.hello).map(late).execute_and_collect()))
"""


def test_a_module_given_with_pyfs_is_importable_on_the_taskmanagers(cluster: Cluster, tmp_path: Path) -> None:
    """``millstream run -pyfs``: the program never calls add_python_file, and the module lives outside
    its directory and is installed nowhere; the command line ships it as the call would."""
    helper = tmp_path / "elsewhere" / "greet.py"
    helper.parent.mkdir()
    helper.write_text("def hello(x):\n    return 'hi ' + x\n")
    prog = _program(tmp_path, PYFS_PROGRAM)
    _ran(cluster.run(prog, options=("-p", "2", "-pyfs", str(helper))), "['hi hi a', 'hi hi b']")


UPLOADED_PROGRAM = """
import sys
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

import greet                      # in libs/, not on the program's path: found only through -pyfs


def late(x):
    import greet as g             # imported on the TaskManager at run time, from what the job shipped
    return g.hello(x)


env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection(sys.argv[1:], type_info=Types.STRING()).map(greet.hello).map(late).print()
env.execute("uploaded with -pyfs")
"""


def test_pyfs_in_the_program_arguments_of_an_uploaded_zip(cluster: Cluster, tmp_path: Path) -> None:
    """Through REST as Flink's PythonDriver: ``-pyfs`` among the run request's program arguments ships a
    file of the uploaded zip with the job; the other arguments reach the program in their order; a
    path out of the upload is a 400 and nothing runs."""
    archive = tmp_path / "job.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("main.py", textwrap.dedent(UPLOADED_PROGRAM))
        z.writestr("libs/greet.py", "def hello(x):\n    return 'hi ' + x\n")
    with open(archive, "rb") as f:
        jar = cluster.http.post("/jars/upload", files={"jarfile": ("job.zip", f)}).json()["filename"]
    before = len(cluster.http.get("/jobs/overview").json()["jobs"])
    for args in (["../../../../etc/hostname"], ["/etc/hostname"], ["libs/../../archive.zip"]):
        r = cluster.http.post(f"/jars/{jar}/run", json={"programArgsList": ["a", "-pyfs", *args]})
        assert r.status_code == 400 and "outside the uploaded program's directory" in r.json()["errors"][0], r.text
    assert len(cluster.http.get("/jobs/overview").json()["jobs"]) == before
    run = cluster.http.post(
        f"/jars/{jar}/run", json={"parallelism": 2, "programArgsList": ["a", "-pyfs", "libs/greet.py", "-b"]}
    )
    assert run.status_code == 200, run.text
    jid = run.json()["jobid"]
    job = cluster.wait_state(jid, ("FINISHED", "FAILED", "CANCELED"), 60)
    assert job["state"] == "FINISHED", job
    lines = cluster.http.get(f"/jobs/{jid}/stdout", params={"maxLines": 100}).json()["lines"]
    assert sorted(line.split("> ")[-1].strip() for line in lines if "hi" in line) == ["hi hi -b", "hi hi a"], lines
