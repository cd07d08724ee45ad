"""The one place that reads the environment: every setting, with its env name.

``REDIS_URL`` and ``DATABASE_URL`` keep their conventional names; everything
else is ``MILLSTREAM_*``. Values are passed down to the engine as plain objects.
"""
from __future__ import annotations

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
    data_dir: Path = Path("var")
    state_dirs: str | None = None  # comma-separated extra directories savepoints may be written to or restored from
    savepoint_dir: Path | None = None  # default savepoint target (Flink's state.savepoints.dir); unset: <data_dir>/savepoints
    jobmanager: str = "http://127.0.0.1:8081"  # where `millstream run` submits
    taskmanagers: int = 2
    slots: int = 2
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 10_000
    buffer_records: int = 1024  # records per network buffer before it is flushed
    credits: int = 8  # unread buffers a producer may have in one channel
    max_upload_bytes: int = 50 * 1024 * 1024
    plan_timeout_s: float = 60.0  # running an uploaded program to get its JobGraph
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
    max_parallelism: int = 128  # per operator, cluster-wide cap on top of each job's own: the default max-parallelism bound (raise it for bigger jobs)
    max_concurrent_jobs: int | None = None  # jobs not yet in a terminal state; unset: no limit
    job_archive_after_ms: int = 60_000  # an ended job leaves JobManager memory for SQL this long after its end
    max_request_bytes: int = 64 * 1024 * 1024  # any request body; uploads also obey max_upload_bytes
    spark_master: str = Field(default="local[*]", validation_alias=AliasChoices("SPARK_MASTER", "MILLSTREAM_SPARK_MASTER"))
    batch_engine: str = "spark"  # where BATCH jobs run: spark, or native (the streaming runtime in batch mode)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'millstream.db').resolve()}"

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
    def resolved_savepoint_dir(self) -> Path:
        return (self.savepoint_dir or self.data_dir / "savepoints").resolve()

    @property
    def checkpoint_dir(self) -> Path:
        return (self.data_dir / "checkpoints").resolve()

    @property
    def state_roots(self) -> list[Path]:
        """Every directory a REST caller or a job may name for state: savepoints, checkpoints, MILLSTREAM_STATE_DIRS."""
        extra = [Path(d.strip()).resolve() for d in (self.state_dirs or "").split(",") if d.strip()]
        return [self.resolved_savepoint_dir, self.checkpoint_dir, *extra]

    @property
    def upload_dir(self) -> Path:
        return self.data_dir / "uploads"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"


def get_settings() -> Settings:
    return Settings()
