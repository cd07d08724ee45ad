"""``millstream run -pyfs/-pyarch/-pyreq``: how the values are parsed and checked, what they do to an
environment, and how the CLI answers a value that names nothing (one line, exit code 2)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from millstream.engine.client.context import LocalContext
from millstream.engine.client.python_options import BadDependencyOption, PythonDependencyOptions, parse, split_program_args
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    for name in ("lib.zip", "model.zip", "data.zip"):
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            z.writestr("a.txt", "a")
    (tmp_path / "not_a_zip.zip").write_text("plain text")
    (tmp_path / "requirements.txt").write_text("msreqdemo==0.1\n")
    (tmp_path / "wheels").mkdir()
    return tmp_path


def test_values_are_parsed_as_flink_gives_them(files: Path) -> None:
    opts = parse(
        f"{files}/helper.py, {files}/pkg,{files}/lib.zip,",
        f"{files}/model.zip#models/v1,{files}/data.zip",
        f"{files}/requirements.txt#{files}/wheels",
    )
    assert opts.files == [str(files / "helper.py"), str(files / "pkg"), str(files / "lib.zip")]
    assert opts.archives == [(str(files / "model.zip"), "models/v1"), (str(files / "data.zip"), None)]
    assert opts.requirements == (str(files / "requirements.txt"), str(files / "wheels"))
    # The client imports a module or package from its directory, a zip as it is.
    assert opts.client_path() == [str(files), str(files / "lib.zip")]
    assert parse(None, None, f"{files}/requirements.txt").requirements == (str(files / "requirements.txt"), None)
    assert not parse(None, None, None)


@pytest.mark.parametrize(
    "args, message",
    [
        (("{d}/nope.py", None, None), "-pyfs: the file or directory '{d}/nope.py' does not exist"),
        ((None, "{d}/model.zip,{d}/gone.zip#x", None), "-pyarch: the archive '{d}/gone.zip' does not exist"),
        ((None, "{d}/not_a_zip.zip", None), "is not a zip file"),
        ((None, "{d}/model.zip#../up", None), "must be a relative directory name"),
        ((None, "{d}/model.zip#", None), "must be a relative directory name"),
        ((None, None, "{d}/missing.txt"), "-pyreq: the requirements file '{d}/missing.txt' does not exist"),
        ((None, None, "{d}/requirements.txt#{d}/nocache"), "requirements cache directory '{d}/nocache' does not exist"),
        ((None, None, "{d}/requirements.txt#"), "nothing follows '#'"),
    ],
)
def test_a_value_naming_nothing_usable_is_refused_with_the_option_and_path(
    files: Path, args: tuple[str | None, ...], message: str
) -> None:
    with pytest.raises(BadDependencyOption) as e:
        parse(*(a.format(d=files) if a else None for a in args))
    assert message.format(d=files) in str(e.value)


def test_every_environment_the_program_creates_gets_them_as_from_the_api_calls(files: Path) -> None:
    """The context applies them when an environment is created, so the graph the program builds
    carries them exactly as if it had called add_python_file & co. itself."""
    from millstream.engine.client.context import set_context

    opts = parse(f"{files}/helper.py", f"{files}/model.zip#m,{files}/data.zip", f"{files}/requirements.txt#{files}/wheels")
    previous = set_context(LocalContext(1, opts))
    try:
        envs = [StreamExecutionEnvironment.get_execution_environment() for _ in range(2)]
    finally:
        set_context(previous)
    by_api = StreamExecutionEnvironment()
    by_api.add_python_file(f"{files}/helper.py")
    by_api.add_python_archive(f"{files}/model.zip", "m")
    by_api.add_python_archive(f"{files}/data.zip")
    by_api.set_python_requirements(f"{files}/requirements.txt", f"{files}/wheels")
    for env in envs:
        env.from_collection([1]).print()
        graph = env.get_stream_graph()
        assert graph.python_files == [str(files / "helper.py")]
        assert graph.python_archives == by_api._python_archives == [(str(files / "model.zip"), "m"), (str(files / "data.zip"), "data.zip")]
        assert graph.python_requirements == by_api._python_requirements
    assert PythonDependencyOptions().client_path() == []


def test_the_cli_answers_a_missing_file_with_one_line_and_exit_code_2(files: Path) -> None:
    from millstream.backend.cli import app

    prog = files / "prog.py"
    prog.write_text("raise SystemExit('the program must not run')\n")
    for option, value, said in (
        ("-pyfs", f"{files}/helper.py,{files}/absent.py", "-pyfs: the file or directory"),
        ("--pyArchives", f"{files}/absent.zip#t", "-pyarch: the archive"),
        ("-pyreq", f"{files}/requirements.txt#{files}/absent", "-pyreq: the requirements cache directory"),
    ):
        res = CliRunner().invoke(app, ["run", option, value, "-p", "2", str(prog)])
        assert res.exit_code == 2, res.output
        assert said in res.output and "absent" in res.output
        assert "Traceback" not in res.output and "must not run" not in res.output


def test_program_arguments_give_up_only_the_dependency_options() -> None:
    """As Flink's PythonDriver for a job uploaded through REST: the options in both forms, with the
    value apart or after '=', anywhere among the arguments; the rest stays in its order."""
    values, rest = split_program_args(
        ["--in", "x", "-pyfs", "a.py,b", "y", "--pyArchives=m.zip#m", "-pyreq", "-r.txt", "--pyfs", "-p", "2"]
    )
    assert values == ("a.py,b", "m.zip#m", "-r.txt")  # a value may start with '-': it is the option's
    assert rest == ["--in", "x", "y", "--pyfs", "-p", "2"]  # "--pyfs" is no name of the option
    assert split_program_args(["-pyfs", "a", "--pyFiles", "b"])[0] == ("b", None, None)  # the last wins
    assert split_program_args(["a", "b"]) == ((None, None, None), ["a", "b"])
    with pytest.raises(BadDependencyOption, match="-pyreq needs a value"):
        split_program_args(["x", "-pyreq"])


def test_a_resolver_decides_where_paths_are_found(files: Path) -> None:
    opts = parse("helper.py", None, "requirements.txt#wheels", resolve=lambda p, option: str(files / p))
    assert opts.files == [str(files / "helper.py")]
    assert opts.requirements == (str(files / "requirements.txt"), str(files / "wheels"))
    assert PythonDependencyOptions.from_dict(opts.to_dict()) == opts
