"""TaskExecutorGateway: how the JobManager talks to TaskManagers (Flink's interface name)."""
from __future__ import annotations

import logging
from typing import Protocol

import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.deployment import TaskDeploymentDescriptor
from millstream.engine.runtime.io.redis_collect import expire_results
from millstream.engine.taskexecutor import code_signing, messages

log = logging.getLogger("millstream.gateway")


class TaskExecutorGateway(Protocol):
    def upload_user_code(self, job_id: str, code: bytes) -> None: ...

    def submit_task(self, tm_id: str, slot: int, tdd: TaskDeploymentDescriptor) -> None: ...

    def cancel_job(self, tm_id: str, slot: int, job_id: str, attempt: int) -> None: ...

    def release_job(self, job_id: str) -> None:
        """Drop the job's short-lived Redis data: channels, credits, user code (collected results
        unread yet expire later)."""

    def trigger_checkpoint(self, tm_id: str, slot: int, msg: dict) -> None: ...

    def request_stack_samples(self, tm_id: str, slot: int, msg: dict) -> None:
        """``msg`` is ``messages.request_stack_samples(...)``: the slot samples that vertex's task threads."""

    def release_attempt(self, job_id: str, attempt: int) -> None:
        """Drop the channels of a failed attempt: the next attempt never reads them."""

    def notify_checkpoint_complete(self, tm_id: str, slot: int, msg: dict) -> None: ...

    def notify_checkpoint_aborted(self, tm_id: str, slot: int, msg: dict) -> None:
        """``msg`` is ``messages.notify_checkpoint_aborted(...)``; every task of that job attempt in the slot gets it."""

    def request_task_report(self, tm_id: str, slot: int, request: str) -> None:
        """Ask the slot what it runs (``messages.report_tasks``); it answers into ``task_offers``."""

    def task_offers(self, request: str) -> dict[tuple[str, int], dict]:
        """The answers to ``request`` so far, by (TaskManager, slot): each a ``messages.task_offer``."""


class RedisTaskExecutorGateway:
    """``client`` is the control Redis (fenced writes under HA); ``data_clients`` the data servers
    channels are sharded over (MILLSTREAM_DATA_REDIS_URLS), none when channels live on ``client``."""

    def __init__(
        self,
        client: redis.Redis,
        cluster_secret: str | None = None,
        epoch: int | None = None,
        data_clients: list[redis.Redis] | None = None,
    ) -> None:
        self.client = client
        self.cluster_secret = cluster_secret
        self.epoch = epoch  # the JobManager's: slots seal what they report back for it
        self.data_clients = list(data_clients or [])

    def _send(self, tm_id: str, slot: int, msg: dict) -> None:
        # Sealed for this slot's inbox: the slot drops anything that is not (a forged deploy, cancel...).
        # It carries the JobManager's epoch, which the slot's reports must carry back.
        inbox = redis_keys.slot_inbox(tm_id, slot)
        if self.epoch is not None:
            msg = {**msg, "epoch": self.epoch}
        self.client.rpush(inbox, messages.seal(msg, self.cluster_secret, inbox))

    def upload_user_code(self, job_id: str, code: bytes) -> None:
        # Signed, so a TaskManager never unpickles code that someone else put into Redis.
        self.client.set(redis_keys.job_user_code(job_id), code_signing.sign(self.cluster_secret or "", job_id, code))

    def submit_task(self, tm_id: str, slot: int, tdd: TaskDeploymentDescriptor) -> None:
        self._send(tm_id, slot, messages.deploy(tdd.to_dict()))

    def cancel_job(self, tm_id: str, slot: int, job_id: str, attempt: int) -> None:
        self._send(tm_id, slot, messages.cancel(job_id, attempt))

    def release_job(self, job_id: str) -> None:
        keys = list(self.client.scan_iter(match=redis_keys.job_channels_pattern(job_id), count=1000))
        keys.append(redis_keys.job_user_code(job_id))
        # Fenced first: a JobManager that lost the lease raises here and never reaches the data servers.
        for i in range(0, len(keys), 500):
            self.client.delete(*keys[i : i + 500])
        self._drop_on_data_servers(redis_keys.job_channels_pattern(job_id))
        expire_results(self.client, job_id)  # not dropped: an attached client may still be reading them

    def trigger_checkpoint(self, tm_id: str, slot: int, msg: dict) -> None:
        self._send(tm_id, slot, msg)

    def notify_checkpoint_complete(self, tm_id: str, slot: int, msg: dict) -> None:
        self._send(tm_id, slot, msg)

    def notify_checkpoint_aborted(self, tm_id: str, slot: int, msg: dict) -> None:
        self._send(tm_id, slot, msg)

    def request_stack_samples(self, tm_id: str, slot: int, msg: dict) -> None:
        self._send(tm_id, slot, msg)

    def request_task_report(self, tm_id: str, slot: int, request: str) -> None:
        self._send(tm_id, slot, messages.report_tasks(request))

    def task_offers(self, request: str) -> dict[tuple[str, int], dict]:
        key = redis_keys.task_offers(request)
        out: dict[tuple[str, int], dict] = {}
        for field, value in self.client.hgetall(key).items():
            offer = messages.open_report(value, self.cluster_secret, "task_offer", key, field.decode())
            if offer is None:
                continue  # not sealed by a slot of this cluster for this request and field: not an answer
            tm, _, slot = field.decode().rpartition(":")
            # bound to its field by the seal; the body must say the same
            if offer.get("tm") == tm and slot.isdigit() and offer.get("slot") == int(slot):
                out[(tm, int(slot))] = offer
        return out

    def release_attempt(self, job_id: str, attempt: int) -> None:
        pattern = redis_keys.attempt_channels_pattern(job_id, attempt)
        keys = list(self.client.scan_iter(match=pattern, count=1000))
        if self.data_clients and not keys:
            # One fenced write on the control Redis even so (of a key that never exists): under HA, a
            # JobManager that lost the lease is refused here before it touches the data servers.
            keys = [pattern]
        for i in range(0, len(keys), 500):
            self.client.delete(*keys[i : i + 500])
        self._drop_on_data_servers(pattern)

    def _drop_on_data_servers(self, pattern: str) -> None:
        """Delete the keys matching ``pattern`` on every data server that answers. One that is down
        keeps its keys: nothing reads them (channels are per attempt), and an embedded server comes
        back empty anyway; the JobManager must not stall or fail over that."""
        for data in self.data_clients:
            try:
                keys = list(data.scan_iter(match=pattern, count=1000))
                for i in range(0, len(keys), 500):
                    data.delete(*keys[i : i + 500])
            except redis.RedisError as e:
                log.warning("could not drop channels %s on data server %s: %s", pattern, _where(data), e)


def _where(client: redis.Redis) -> str:
    kw = client.connection_pool.connection_kwargs
    return f"{kw.get('host', '?')}:{kw.get('port', '?')}"
