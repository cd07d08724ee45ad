"""Task reconciliation after a JobManager takeover or restart: which running tasks a new JobManager
adopts instead of redeploying them (Flink's JobMaster reconnection, where TaskExecutors keep their
tasks while the JobMaster is away and offer their slots to the new one).

Pure: given the slots' answers to ``report_tasks`` (engine/taskexecutor/messages.py ``task_offer``),
it decides per job; the Dispatcher does the asking and the JobMaster the adopting. A job is adopted
only when every subtask of the attempt SQL recorded last runs or has finished, reported by a
registered TaskManager; anything less (a task gone, failed or cancelled, a TaskManager that did not
answer) restarts it from its latest checkpoint, as before. A slot reports the tasks that ended there
with their final state: a task that finished while no JobManager led (its FINISHED report was sealed
for the dead one's epoch) is adopted as finished, so a bounded job whose input ran out meanwhile
finishes instead of running again from its checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from millstream.engine.graph.job_graph import JobGraph


@dataclass(frozen=True)
class OfferedTask:
    job: str
    vertex: str
    subtask: int
    attempt: int
    state: str
    taskmanager_id: str
    slot: int


@dataclass(frozen=True)
class TaskOffers:
    """Every answer a recovering JobManager got: the tasks, and per job attempt the highest
    checkpoint id any of its tasks had seen."""

    tasks: tuple[OfferedTask, ...] = ()
    checkpoints: Mapping[tuple[str, int], int] = field(default_factory=dict)
    answered: frozenset[tuple[str, int]] = frozenset()  # (TaskManager, slot) that answered

    @staticmethod
    def parse(answers: Mapping[tuple[str, int], Mapping[str, Any]]) -> "TaskOffers":
        """From ``gateway.task_offers``; entries of the wrong shape are left out, not trusted."""
        tasks: list[OfferedTask] = []
        checkpoints: dict[tuple[str, int], int] = {}
        for (tm, slot), offer in answers.items():
            for t in offer.get("tasks") or ():
                try:
                    tasks.append(OfferedTask(
                        str(t["job"]), str(t["vertex"]), int(t["subtask"]), int(t["attempt"]), str(t["state"]), tm, slot
                    ))
                except (KeyError, TypeError, ValueError):
                    continue
            for entry in offer.get("checkpoints") or ():
                try:
                    job, attempt, cid = str(entry[0]), int(entry[1]), int(entry[2])
                except (IndexError, TypeError, ValueError):
                    continue
                checkpoints[(job, attempt)] = max(cid, checkpoints.get((job, attempt), 0))
        return TaskOffers(tuple(tasks), checkpoints, frozenset(answers))

    def of_job(self, job: str) -> list[OfferedTask]:
        return [t for t in self.tasks if t.job == job]

    def max_checkpoint_seen(self, job: str) -> int:
        """Over every attempt: ids are per job, not per attempt."""
        return max((cid for (j, _), cid in self.checkpoints.items() if j == job), default=0)


@dataclass(frozen=True)
class Adoption:
    """What the JobMaster needs to take over a job's running attempt."""

    attempt: int
    placement: Mapping[tuple[str, int], tuple[str, int]]  # (vertex, subtask) -> (TaskManager, slot)
    max_checkpoint_seen: int
    stale: tuple[tuple[str, int, int], ...] = ()  # (TaskManager, slot, attempt) still running older attempts
    finished: tuple[tuple[str, int], ...] = ()  # (vertex, subtask) that ended FINISHED, unreported till now

    @property
    def slots(self) -> list[tuple[str, int]]:
        return sorted(set(self.placement.values()))


def reconcile(
    job_graph: JobGraph, attempt: int, offers: TaskOffers, registered: Iterable[str]
) -> Adoption | str:
    """The adoption of ``job_graph``'s ``attempt`` (the newest one SQL recorded), or why not."""
    live = set(registered)
    found: dict[tuple[str, int], OfferedTask] = {}
    stale: set[tuple[str, int, int]] = set()
    for t in offers.of_job(job_graph.job_id):
        if t.attempt > attempt:
            return f"a task runs attempt {t.attempt}, newer than attempt {attempt} in SQL"
        if t.attempt < attempt:
            stale.add((t.taskmanager_id, t.slot, t.attempt))
            continue
        if (t.vertex, t.subtask) in found:
            if "FINISHED" in (t.state, found[(t.vertex, t.subtask)].state):
                # Two slots report it, one as ended: impossible for one attempt; trust neither.
                return f"subtask {t.vertex} ({t.subtask}) of attempt {attempt} is reported twice"
            return f"subtask {t.vertex} ({t.subtask}) of attempt {attempt} runs twice"
        found[(t.vertex, t.subtask)] = t
    for v in job_graph.vertices:
        for i in range(v.parallelism):
            t = found.get((v.id, i))
            if t is None:
                return f"subtask {v.name} ({i + 1}/{v.parallelism}) of attempt {attempt} is not running anywhere"
            if t.state not in ("RUNNING", "FINISHED"):
                return f"subtask {v.name} ({i + 1}/{v.parallelism}) is {t.state}, not RUNNING or FINISHED"
            if t.taskmanager_id not in live:
                return f"TaskManager {t.taskmanager_id} of subtask {v.name} ({i + 1}/{v.parallelism}) is not registered"
    expected = {(v.id, i) for v in job_graph.vertices for i in range(v.parallelism)}
    if set(found) != expected:
        return "tasks of vertices the job does not have run under its id"
    placement = {k: (t.taskmanager_id, t.slot) for k, t in found.items()}
    finished = tuple(sorted(k for k, t in found.items() if t.state == "FINISHED"))
    return Adoption(attempt, placement, offers.max_checkpoint_seen(job_graph.job_id), tuple(sorted(stale)), finished)
