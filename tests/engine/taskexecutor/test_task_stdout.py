"""A slot process's stdout: everything on the real stream, a job's lines also on its Redis stream."""
from __future__ import annotations

import io
import threading

import redis

from millstream.engine.runtime.io.job_stdout import StdoutForwarder, read_lines
from millstream.engine.taskexecutor.task_stdout import TaskStdout


def _stdout(redis_url: str) -> tuple[TaskStdout, io.StringIO, redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    real = io.StringIO()
    return TaskStdout(real, StdoutForwarder(client)), real, client


def test_print_in_a_task_thread_goes_to_its_job_and_to_stdout(redis_url: str) -> None:
    out, real, client = _stdout(redis_url)

    def task(job: str, n: int) -> None:
        out.bind(job)
        for i in range(n):
            print(f"{job} {i}", file=out)
        print("no newline", end="", file=out)
        out.unbind()

    threads = [threading.Thread(target=task, args=(j, 200)) for j in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("not a task", file=out)  # the main thread, no job running: stdout only
    assert out.forwarder.flush()
    for job in ("a", "b"):
        assert read_lines(client, job, 0).lines == [f"{job} {i}" for i in range(200)] + ["no newline"]
    lines = real.getvalue().splitlines()
    assert "a 150" in lines and "b 150" in lines and real.getvalue().endswith("not a task\n")


def test_print_sink_lines_and_an_unbound_thread_of_the_only_job(redis_url: str) -> None:
    out, real, client = _stdout(redis_url)
    out.bind("a")
    out.print_line("a", "1> x\n1> y")
    helper = threading.Thread(target=lambda: print("from a source thread", file=out))
    helper.start()
    helper.join()
    out.unbind()
    assert out.forwarder.flush()
    assert read_lines(client, "a", 0).lines == ["1> x", "1> y", "from a source thread"]
    assert real.getvalue() == "1> x\n1> y\nfrom a source thread\n"


def test_task_lines_come_out_whole_while_threads_print_at_once() -> None:
    """print() writes text and newline separately; without a forwarder (the mini-cluster) the
    wrapper only keeps each task's lines whole on the real stream."""
    real = io.StringIO()
    out = TaskStdout(real, None)

    def task(name: str) -> None:
        out.bind("job")
        for i in range(300):
            print(f"{name} {i}", file=out)
        out.unbind()

    threads = [threading.Thread(target=task, args=(n,)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = real.getvalue().splitlines()
    assert sorted(lines) == sorted(f"{n} {i}" for n in ("a", "b", "c") for i in range(300))
    print("progress", end="", file=out)  # the program's own thread, no job: out on flush
    out.flush()
    assert real.getvalue().endswith("progress")
