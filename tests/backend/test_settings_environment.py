"""Unknown ``MILLSTREAM_*`` variables are refused, and every one the repository uses is declared.

The second half reads the repository itself: a variable named in code, tests, benchmarks,
docker-compose.yml, the Dockerfile, the Makefile or the README that no setting declares would
make every process refuse to start where it is set.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from millstream.backend.settings import (
    OTHER_VARIABLES,
    Settings,
    UnknownSettingError,
    check_environment,
    known_variables,
)

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["engine", "backend", "migrations", "tests", "benchmarks", "examples", "docs", ".ci"]
SCANNED_FILES = ["docker-compose.yml", "Dockerfile", "Makefile", "README.md", "conftest.py", "pyproject.toml"]
NAME = re.compile(r"\bMILLSTREAM_[A-Z0-9_]*[A-Z0-9]\b")


def test_known_settings_pass():
    check_environment({"MILLSTREAM_PORT": "1", "MILLSTREAM_CHECKPOINT_DIR": "/x", "REDIS_URL": "redis://", "PATH": "/"})


def test_aliases_and_other_variables_are_known():
    known = known_variables()
    assert {"MILLSTREAM_REDIS_URL", "MILLSTREAM_DATABASE_URL", "MILLSTREAM_SPARK_MASTER"} <= known
    assert set(OTHER_VARIABLES) <= known


def test_an_unknown_variable_is_named_with_the_closest_known_one():
    with pytest.raises(UnknownSettingError) as e:
        check_environment({"MILLSTREAM_CHEKPOINT_DIR": "/x", "MILLSTREAM_PORT": "1", "MILLSTREAM_QWERTY": "1"})
    assert e.value.unknown == ["MILLSTREAM_CHEKPOINT_DIR", "MILLSTREAM_QWERTY"]
    message = str(e.value)
    assert "MILLSTREAM_CHEKPOINT_DIR (did you mean MILLSTREAM_CHECKPOINT_DIR?)" in message
    assert "MILLSTREAM_QWERTY," in message or "MILLSTREAM_QWERTY." in message  # no far-fetched suggestion
    assert "did you mean MILLSTREAM_PORT" not in message


def test_case_is_ignored_as_pydantic_settings_ignores_it():
    check_environment({"millstream_port": "1"})
    with pytest.raises(UnknownSettingError):
        check_environment({"millstream_prot": "1"})


def test_the_checkpoint_dir_setting():
    assert Settings(data_dir=Path("/d")).resolved_checkpoint_dir == "/d/checkpoints"
    assert Settings(checkpoint_dir="/shared/chk").resolved_checkpoint_dir == "/shared/chk"
    assert "/shared/chk" in Settings(checkpoint_dir="/shared/chk").state_roots
    # Any fsspec URL, as given (the store's package must be installed where it is used).
    assert Settings(checkpoint_dir="s3://bucket/chk/").resolved_checkpoint_dir == "s3://bucket/chk"
    assert Settings(checkpoint_dir="file:///shared/chk").resolved_checkpoint_dir == "/shared/chk"


def test_every_variable_the_repository_uses_is_declared():
    used: dict[str, set[str]] = {}
    paths = [p for d in SCANNED for p in (ROOT / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    paths += [ROOT / f for f in SCANNED_FILES]
    for path in paths:
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for name in NAME.findall(text):
            used.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert "MILLSTREAM_CHECKPOINT_DIR" in used  # the scan sees docker-compose.yml
    # Names this test file itself makes up to prove the refusal.
    made_up = {"MILLSTREAM_CHEKPOINT_DIR", "MILLSTREAM_QWERTY", "MILLSTREAM_UNKNOWN_THING"}
    undeclared = {n: sorted(p) for n, p in used.items() if n not in known_variables() and n not in made_up}
    assert not undeclared, f"MILLSTREAM_* variables used but not declared in backend/settings.py: {undeclared}"


def test_the_cli_refuses_before_starting_anything(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "MILLSTREAM_UNKNOWN_THING": "1", "MILLSTREAM_DATA_DIR": str(tmp_path / "var")}
    for command in (["jobmanager"], ["taskmanager"], ["cluster", "start"], ["list"]):
        result = subprocess.run(
            [sys.executable, "-m", "millstream.backend.cli", *command], env=env, cwd=ROOT, capture_output=True, text=True,
            timeout=60,
        )
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "unknown setting in the environment: MILLSTREAM_UNKNOWN_THING" in result.stderr, result.stderr
    assert not (tmp_path / "var").exists()


def test_the_app_refuses_when_started_by_uvicorn_directly(tmp_path: Path):
    """``uvicorn --factory millstream.backend.app:create_app`` bypasses the CLI; the app checks the environment itself."""
    env = {"PATH": "/usr/bin:/bin", "MILLSTREAM_UNKNOWN_THING": "1", "MILLSTREAM_DATA_DIR": str(tmp_path / "var"),
           "REDIS_URL": "redis://127.0.0.1:1/0"}
    result = subprocess.run(
        [sys.executable, "-m", "uvicorn", "--factory", "millstream.backend.app:create_app", "--port", "0"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0, (result.stdout, result.stderr)
    assert "unknown setting in the environment: MILLSTREAM_UNKNOWN_THING" in result.stderr, result.stderr
    assert not (tmp_path / "var").exists()


def test_a_process_that_cannot_write_the_checkpoint_dir_does_not_start(tmp_path: Path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    env = {
        "PATH": "/usr/bin:/bin", "REDIS_URL": "redis://127.0.0.1:1/0", "MILLSTREAM_CLUSTER_SECRET": "s" * 32,
        "MILLSTREAM_DATA_DIR": str(tmp_path / "var"), "MILLSTREAM_CHECKPOINT_DIR": str(not_a_dir / "chk"),
    }
    for who, command in (("TaskManager", ["taskmanager"]), ("JobManager", ["jobmanager", "--port", "1"])):
        result = subprocess.run(
            [sys.executable, "-m", "millstream.backend.cli", *command], env=env, cwd=ROOT, capture_output=True, text=True,
            timeout=60,
        )
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert f"the {who} cannot write to its checkpoint directory {not_a_dir / 'chk'}" in result.stderr, result.stderr


def test_the_readme_lists_every_setting():
    """The README's Configuration table names every setting (by each of its variable names)."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Configuration") : readme.index("## Containers")]
    missing = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names = list(alias.choices) if alias is not None else [f"MILLSTREAM_{name.upper()}"]
        missing += [n for n in names if f"`{n}`" not in table]
    assert not missing, f"settings missing from the README's Configuration table: {missing}"
