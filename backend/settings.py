"""The one place that reads the environment: every setting, with its env name.

``REDIS_URL`` and ``DATABASE_URL`` keep their conventional names; everything
else is ``MILLSTREAM_*``. Values are passed down to the engine as plain objects.
A ``MILLSTREAM_*`` variable that names no setting is refused at start-up
(:func:`check_environment`): a typo would otherwise be silently ignored.
"""
from __future__ import annotations

import difflib
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MILLSTREAM_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = 8081
    redis_url: str | None = Field(default=None, validation_alias=AliasChoices("REDIS_URL", "MILLSTREAM_REDIS_URL"))
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "MILLSTREAM_DATABASE_URL")
    )
    # Data plane over several Redis servers (issue 18): comma-separated URLs; channels and their credits are
    # spread over them by a stable hash of the channel; control messages stay on REDIS_URL. Unset: REDIS_URL.
    data_redis_urls: str | None = None
    data_redis_check_interval_ms: int = Field(default=2000, ge=100)  # the leader PINGs each data server this often
    data_dir: Path = Path("var")
    # Checkpoint storage (Flink's state.checkpoints.dir) for jobs that name none; it must be one directory
    # that the JobManager and every TaskManager see (a shared volume across hosts). Unset: <data_dir>/checkpoints.
    # A local path or any fsspec URL (s3://bucket/checkpoints, with that scheme's package installed everywhere).
    checkpoint_dir: str | None = None
    state_dirs: str | None = None  # comma-separated extra directories savepoints may be written to or restored from
    savepoint_dir: str | None = None  # default savepoint target, a path or fsspec URL (Flink's state.savepoints.dir); unset: <data_dir>/savepoints
    jobmanager: str = "http://127.0.0.1:8081"  # where `millstream run` submits; several, comma-separated, are tried in turn
    # JobManager high availability (issue 18): JobManagers sharing Redis and the database elect a leader
    # through a lease in Redis; the others are standbys. `cluster start --jobmanagers N` (N > 1) turns it on.
    high_availability: bool = False
    leader_lease_ms: int = 4000  # the lease's TTL: a dead leader is replaced within about this, plus recovery
    advertised_address: str | None = None  # this JobManager's REST address as other JobManagers and clients reach it
    taskmanagers: int = 2
    taskmanager_host: str = "127.0.0.1"  # the address a TaskManager advertises (`millstream taskmanager --host`); auto: its host name
    slots: int = 2
    # A TaskManager's Prometheus endpoint port (`millstream taskmanager --metrics-port`): 0 picks a free one,
    # -1 serves none. It is bound on the advertised host and listed by the JobManager at /metrics/targets.
    taskmanager_metrics_port: int = Field(default=0, ge=-1, le=65535)
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 10_000
    buffer_records: int = 1024  # records per network buffer before it is flushed
    credits: int = 8  # unread buffers a producer may have in one channel
    # Flink's metrics.latency.interval: sources emit a latency marker this often (ms) in jobs that set no
    # interval of their own (env.get_config().set_latency_tracking_interval); 0, the default, is off.
    latency_interval_ms: int = Field(default=0, ge=0)
    max_upload_bytes: int = 50 * 1024 * 1024
    plan_timeout_s: float = 60.0  # running an uploaded program to get its JobGraph
    # Flink's slot.request.timeout: the JobManager fails a job that waits longer for its slots
    # (NoResourceAvailableException; a job's own slot.request.timeout wins), and an attached
    # `millstream run` gives up on it then too
    slot_request_timeout_s: float = Field(default=300.0, gt=0)
    # How long `millstream run` waits for a JobManager it cannot reach (or a cluster answering 503),
    # e.g. one restarting, before it gives up (exit 3)
    client_retry_timeout_s: float = Field(default=90.0, gt=0)
    max_concurrent_plans: int = 4  # uploaded programs being run for their JobGraph at once; more get 429
    auth_token: str | None = None
    session_ttl_s: float = 12 * 3600  # a dashboard login lasts this long (logout ends it at once)
    audit_retention_days: float = 30.0  # audit rows older than this are deleted
    audit_refusals_per_minute: int = 60  # refused anonymous requests recorded per client and minute; the rest are counted
    auth_reads: bool = False  # with a token, GETs need it too (the dashboard then needs a login)
    cluster_secret: str | None = None  # signs user code in Redis; JobManager and TaskManagers share it
    # Benchmark only (benchmarks/seal_cost.py): with both set, on a loopback cluster without a token, nothing
    # crossing Redis or disk is sealed. Never set them anywhere else: the CLI refuses the second alone.
    benchmark: bool = False
    benchmark_unsealed: bool = False
    cors_origins: str | None = None  # comma-separated allowlist; unset: no CORS headers at all
    allowed_hosts: str | None = None  # comma-separated Host names answered besides loopback and the bind address
    # Flink's parallelism.default: the parallelism of jobs whose program sets none and that were submitted
    # without one (`millstream run` without -p, an uploaded program run without a parallelism). It is the
    # JobManager's: `millstream run` asks the cluster for it, as `flink run` takes the cluster's configuration.
    parallelism_default: int = Field(default=1, ge=1)
    max_parallelism: int = 128  # per operator, cluster-wide cap on top of each job's own: the default max-parallelism bound (raise it for bigger jobs)
    max_concurrent_jobs: int | None = None  # jobs not yet in a terminal state; unset: no limit
    job_archive_after_ms: int = 60_000  # an ended job leaves JobManager memory for SQL this long after its end
    # Flink's web.checkpoints.history: the checkpoints each job's REST history and dashboard list (SQL keeps all)
    checkpoints_history: int = Field(default=10, ge=1)
    max_request_bytes: int = 64 * 1024 * 1024  # any request body; uploads also obey max_upload_bytes
    spark_master: str = Field(default="local[*]", validation_alias=AliasChoices("SPARK_MASTER", "MILLSTREAM_SPARK_MASTER"))
    # The address Spark executors reach the driver at (spark.driver.host): the driver runs on the
    # JobManager's host, so with a remote SPARK_MASTER this must be a name the workers can resolve.
    spark_driver_host: str | None = None
    batch_engine: str = "spark"  # where BATCH jobs run: spark, or native (the streaming runtime in batch mode)
    # Logging (engine/runtime/process_logging.py): a process given a log file (`--log-file`; `cluster start`
    # gives each one under <data_dir>/log) rotates it at log_max_bytes, keeping log_backups old files.
    log_file: Path | None = None
    log_max_bytes: int = Field(default=100 * 1024 * 1024, ge=4096)
    log_backups: int = Field(default=10, ge=0)
    access_log: bool = False  # a line per REST request in the JobManager's log (off: job events stay readable)

    @property
    def data_redis_url_list(self) -> list[str]:
        """MILLSTREAM_DATA_REDIS_URLS as a list (empty: channels live on REDIS_URL)."""
        from millstream.engine.runtime.io.data_servers import parse_urls

        return parse_urls(self.data_redis_urls)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'millstream.db').resolve()}"

    @property
    def spark_conf(self) -> tuple[tuple[str, str], ...]:
        """Spark settings given to every BATCH job's driver."""
        conf: list[tuple[str, str]] = []
        if self.spark_driver_host:
            # Listen on every interface of the JobManager's host; advertise the name given.
            conf += [("spark.driver.host", self.spark_driver_host), ("spark.driver.bindAddress", "0.0.0.0")]
        return tuple(conf)

    @property
    def jobmanager_address(self) -> str:
        """The REST address this JobManager announces as leader (forwarded to by standbys)."""
        if self.advertised_address:
            return self.advertised_address.rstrip("/")
        host = self.host if self.host not in ("0.0.0.0", "::", "") else socket.gethostname()
        return f"http://{host}:{self.port}"

    @property
    def jobmanager_addresses(self) -> list[str]:
        """Where clients look for the JobManager, in order (MILLSTREAM_JOBMANAGER, comma-separated)."""
        return [a.strip().rstrip("/") for a in self.jobmanager.split(",") if a.strip()]

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in (self.cors_origins or "").split(",") if o.strip()]

    @property
    def allowed_host_list(self) -> list[str]:
        """Host names the server answers to when it has no token (backend/origin_guard.py)."""
        hosts = [h.strip().lower() for h in (self.allowed_hosts or "").split(",") if h.strip()]
        if self.host not in ("0.0.0.0", "::", ""):
            hosts.append(self.host.strip("[]").lower())
        return hosts

    @property
    def resolved_savepoint_dir(self) -> str:
        return _resolved(self.savepoint_dir, self.data_dir / "savepoints")

    @property
    def resolved_checkpoint_dir(self) -> str:
        return _resolved(self.checkpoint_dir, self.data_dir / "checkpoints")

    @property
    def state_roots(self) -> list[str]:
        """Every directory a REST caller or a job may name for state: savepoints, checkpoints, MILLSTREAM_STATE_DIRS."""
        extra = [_resolved(d.strip(), Path(".")) for d in (self.state_dirs or "").split(",") if d.strip()]
        return [self.resolved_savepoint_dir, self.resolved_checkpoint_dir, *extra]

    @property
    def upload_dir(self) -> Path:
        return self.data_dir / "uploads"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"

    @property
    def jobmanager_log_file(self) -> Path:
        """This JobManager's log: the one it was given, else the name `cluster start` gives it."""
        return self.log_file or self.log_dir / "jobmanager.log"


def _resolved(directory: str | None, default: Path) -> str:
    """A storage directory as every process names it: an fsspec URL as given, a path made absolute."""
    from millstream.engine.checkpoint.filesystem import is_remote, local_path

    if directory and is_remote(directory):
        return directory.rstrip("/")
    return str(Path(local_path(directory) if directory else default).resolve())


def get_settings() -> Settings:
    return Settings()


#: MILLSTREAM_* variables read outside this class; none configures a running cluster.
OTHER_VARIABLES = {
    "MILLSTREAM_TEST_POSTGRES_URL": "the PostgreSQL server the test suite uses when one is reachable",
    # read by engine/runtime/state/change_log.py in every slot process; a tuning knob, not a setting
    "MILLSTREAM_CHANGE_LOG_MIN_KEYS": "keys a heap state table holds before it logs a reduce's batches as columns (65536)",
    # read by engine/runtime/state/string_columns.py in every slot process; a tuning knob, not a setting
    "MILLSTREAM_TEXT_COLUMNS_MIN_ENTRIES": "entries a heap state file's frame of string keys holds before it is written as text columns (512)",
}


def known_variables() -> set[str]:
    """Every ``MILLSTREAM_*`` name this code base reads: one per setting, their aliases, and OTHER_VARIABLES."""
    names = set(OTHER_VARIABLES)
    prefix = Settings.model_config.get("env_prefix", "")
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(c).upper() for c in alias.choices if isinstance(c, str))
        else:
            names.add(f"{prefix}{name}".upper())
    return {n for n in names if n.startswith("MILLSTREAM_")}


class UnknownSettingError(ValueError):
    """``MILLSTREAM_*`` variables in the environment that name no setting."""

    def __init__(self, unknown: list[str], known: set[str]) -> None:
        self.unknown = unknown
        parts = []
        for name in unknown:
            # Compared without the shared prefix, which would make every name look alike.
            stems = {k[len("MILLSTREAM_"):]: k for k in known}
            close = difflib.get_close_matches(name.upper()[len("MILLSTREAM_"):], sorted(stems), n=1, cutoff=0.6)
            parts.append(f"{name} (did you mean {stems[close[0]]}?)" if close else name)
        super().__init__(
            f"unknown setting{'s' if len(unknown) > 1 else ''} in the environment: {', '.join(parts)}. "
            "Millstream reads no such variable, so its value would be ignored; unset or rename it. "
            "The settings are listed in the README's Configuration section."
        )


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse unknown ``MILLSTREAM_*`` variables (raises :class:`UnknownSettingError`)."""
    env = os.environ if environ is None else environ
    known = known_variables()
    unknown = sorted(k for k in env if k.upper().startswith("MILLSTREAM_") and k.upper() not in known)
    if unknown:
        raise UnknownSettingError(unknown, known)
