"""Every Redis key Millstream uses, one template per kind of key.

Everything under these keys is short-lived and can be rebuilt: channels,
credits, heartbeats, live metrics, control inboxes, collected results.
"""
from __future__ import annotations

PREFIX = "ms"

# data plane
CHANNEL = PREFIX + ":ch:{job}:{attempt}:{edge}:{src}:{dst}"  # list of buffers
CREDIT = PREFIX + ":cr:{job}:{attempt}:{edge}:{src}:{dst}"  # list of credit tokens
JOB_CHANNELS_PATTERN = PREFIX + ":c[hr]:{job}:*"
ATTEMPT_CHANNELS_PATTERN = PREFIX + ":c[hr]:{job}:{attempt}:*"
# on the control Redis: the leading JobManager's data servers (data_servers.fingerprint), checked at deploy
DATA_SERVERS = PREFIX + ":data:servers"

# control plane
JOBMANAGER_INBOX = PREFIX + ":jm:inbox"  # list: task state changes, acks, registrations
JOBMANAGER_LEADER = PREFIX + ":jm:leader"  # the leader's lease: "token|since ms|address" sealed (mac.seal_text), with a TTL
JOBMANAGER_LEADER_EPOCH = PREFIX + ":jm:leader:epoch"  # int: the last fencing token handed out
JOBMANAGER_EPOCH = PREFIX + ":jm:epoch"  # sealed: the running JobManager's epoch, which its inbox demands
# hash: "{tm}:{slot}" -> sealed list of the tasks that slot runs, answering a recovering JobManager's
# report_tasks request (engine/jobmanager/task_reconciliation.py); short TTL
TASK_OFFERS = PREFIX + ":jm:offers:{request}"
TASK_OFFERS_TTL_S = 60
JOBMANAGER_MEMBERS = PREFIX + ":jm:members"  # sorted set: JobManager REST address -> last seen (epoch ms)
SLOT_INBOX = PREFIX + ":tm:{tm}:slot:{slot}:inbox"  # list: deploy / cancel for one slot
TASKMANAGERS = PREFIX + ":tm:registry"  # hash: tm id -> msgpack info
TASKMANAGER_HEARTBEAT = PREFIX + ":tm:{tm}:hb"  # string with TTL
JOB_USER_CODE = PREFIX + ":job:{job}:code"  # bytes: cloudpickled StreamGraph

# observation
TASK_METRICS = PREFIX + ":metrics:{job}"  # hash: "{vertex}:{subtask}" -> msgpack metrics
TASKMANAGER_METRICS = PREFIX + ":tm:{tm}:metrics"  # msgpack, with TTL
# hash: "{vertex}:{subtask}" -> sealed stack samples answering one flame graph request (short TTL)
STACK_SAMPLES = PREFIX + ":flame:{request}"
STACK_SAMPLES_TTL_S = 120
TASKMANAGER_LOG = PREFIX + ":tm:{tm}:log"  # its log lines, sealed (engine/taskexecutor/log_shipper.py)
COLLECT = PREFIX + ":collect:{job}"  # list: execute_and_collect entries not acknowledged yet
COLLECT_META = PREFIX + ":collect:{job}:meta"  # hash: acked (entries trimmed), bytes (in the list)
# The job's print() lines (Flink's .out, per job), for attached clients: a capped list, and the count
# of lines ever appended, so a reader learns how many the cap dropped. See engine/runtime/io/job_stdout.py.
JOB_STDOUT = PREFIX + ":stdout:{job}"  # list of str lines, the newest JOB_STDOUT_MAX_LINES
JOB_STDOUT_TOTAL = PREFIX + ":stdout:{job}:total"  # int: lines appended since the job started
JOB_STDOUT_MAX_LINES = 100_000  # the oldest are dropped beyond this, read or not
JOB_STDOUT_TTL_S = 3600  # refreshed by every append: the lines outlive the job by an hour

# Spark runner
SPARK_PROGRESS = PREFIX + ":spark:{job}:progress"  # JSON: application id, UI URL, Spark jobs and stages
SPARK_CANCEL = PREFIX + ":spark:{job}:cancel"  # string: present once cancellation was requested
SPARK_PROGRESS_TTL_S = 3600  # long enough for a finished job's page to still show its stages


def channel(job: str, attempt: int, edge: int, src: int, dst: int) -> str:
    return CHANNEL.format(job=job, attempt=attempt, edge=edge, src=src, dst=dst)


def credit(job: str, attempt: int, edge: int, src: int, dst: int) -> str:
    return CREDIT.format(job=job, attempt=attempt, edge=edge, src=src, dst=dst)


def job_channels_pattern(job: str) -> str:
    return JOB_CHANNELS_PATTERN.format(job=job)


def attempt_channels_pattern(job: str, attempt: int) -> str:
    return ATTEMPT_CHANNELS_PATTERN.format(job=job, attempt=attempt)


def slot_inbox(tm: str, slot: int) -> str:
    return SLOT_INBOX.format(tm=tm, slot=slot)


def taskmanager_heartbeat(tm: str) -> str:
    return TASKMANAGER_HEARTBEAT.format(tm=tm)


def taskmanager_metrics(tm: str) -> str:
    return TASKMANAGER_METRICS.format(tm=tm)


def taskmanager_log(tm: str) -> str:
    return TASKMANAGER_LOG.format(tm=tm)


def task_offers(request: str) -> str:
    return TASK_OFFERS.format(request=request)


def stack_samples(request: str) -> str:
    return STACK_SAMPLES.format(request=request)


def job_user_code(job: str) -> str:
    return JOB_USER_CODE.format(job=job)


def task_metrics(job: str) -> str:
    return TASK_METRICS.format(job=job)


def collect(job: str) -> str:
    return COLLECT.format(job=job)


def collect_meta(job: str) -> str:
    return COLLECT_META.format(job=job)


def job_stdout(job: str) -> str:
    return JOB_STDOUT.format(job=job)


def job_stdout_total(job: str) -> str:
    return JOB_STDOUT_TOTAL.format(job=job)


def spark_progress(job: str) -> str:
    return SPARK_PROGRESS.format(job=job)


def spark_cancel(job: str) -> str:
    return SPARK_CANCEL.format(job=job)
