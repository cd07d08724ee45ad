"""Restore of an incremental chain from S3 with a round trip to pay on every request (issue 16):
the chain's files read one after another against several at a time (``state_downloader``,
``state.backend.rocksdb.checkpoint.transfer.thread.num``); and checkpoints written there, their files
uploaded one after another against several at a time (``state_uploader``, the same option).

An S3-compatible server (moto's server mode) runs behind a TCP proxy that hands on every chunk,
each way, ``--delay-ms`` after it arrived: a round trip of twice that, as a region's S3 has 10-30 ms
to the first byte. The chain is written by the real writers (an on-disk
backend's ``snapshot_keyed_incremental``, files with their index in a footer, as a TaskManager writes
them) into ``s3://<bucket>/<job>/shared``; each round then restores it into a new on-disk backend
through the task's restore path (``restore_keyed`` reading with ``iter_shared_parts``), alternating
thread counts, and checks the restored entries.

``python benchmarks/remote_restore_bench.py [--keys 200000] [--deltas 60] [--delay-ms 10] [--rounds 3]``
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

JOB = "cd" * 16
MAX_P = 128
BUCKET = "restore-bench"

# A TCP proxy in front of the server that hands on every chunk, each way, ``delay`` seconds after
# it arrived, in order (what netem does to packets; this VM's kernel has no netem).
PROXY = """
import asyncio, sys, time
delay, listen, target = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

async def pipe(reader, writer):
    queue = asyncio.Queue()
    async def send():
        while (item := await queue.get()) is not None:
            due, data = item
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            writer.write(data)
            await writer.drain()
        writer.close()
    sender = asyncio.create_task(send())
    while data := await reader.read(65536):
        queue.put_nowait((time.monotonic() + delay, data))
    queue.put_nowait(None)
    await sender

async def serve(client_r, client_w):
    server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w), return_exceptions=True)

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


class _Operator:
    """An operator with no timers and no tables of its own: the backend's state is all there is."""

    def timer_services(self) -> dict:
        return {}

    def keyed_tables(self) -> dict:
        return {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--deltas", type=int, default=60, help="deltas after the base, each changing 1 %% of the keys")
    ap.add_argument("--delay-ms", type=float, default=10.0, help="delay each way (a round trip is twice this)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,4,8")
    ap.add_argument("--write-checkpoints", type=int, default=20, help="checkpoints written per round, 5 %% of the keys each")
    args = ap.parse_args()

    port, proxied = _free_port(), _free_port()
    log = tempfile.TemporaryFile()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    proxy = subprocess.Popen([sys.executable, "-c", PROXY, str(args.delay_ms / 1000), str(proxied), str(port)])
    endpoint = f"http://127.0.0.1:{proxied}"
    os.environ.update(
        FSSPEC_S3_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
    )
    work = tempfile.mkdtemp(prefix="restore-bench-")
    try:
        _wait_for(endpoint, server)
        print(f"machine: {_machine()}", flush=True)
        print(f"S3 (moto's server) behind a proxy delaying every chunk {args.delay_ms:g} ms each way", flush=True)
        _run(args, work)
    finally:
        for p in (proxy, server):
            p.terminate()
            p.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def _wait_for(endpoint: str, server: subprocess.Popen) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="bench", secret="bench", skip_instance_cache=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            fs.mkdir(BUCKET)
            return
        except Exception:  # still starting
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the S3 server did not start")
            time.sleep(0.3)


def _run(args: Any, work: str) -> None:
    from millstream.engine.checkpoint.filesystem import storage_fs
    from millstream.engine.checkpoint.rescale import OperatorRestore
    from millstream.engine.checkpoint.state_origin import StateOrigin
    from millstream.engine.checkpoint.storage import METADATA_FILE, iter_shared_parts, seal_state_files, write_shared_file
    from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
    from millstream.engine.runtime.state.state_chain import FOOTER, SharedFile, encode_index, written_file
    from millstream.engine.runtime.state.task_state_manager import restore_keyed, snapshot_keyed_incremental

    seal_state_files("b" * 32)
    root = f"s3://{BUCKET}/{JOB}"
    shared = f"{root}/shared"
    names = iter(range(1 << 30))

    def write(kind: str, parts: Any) -> SharedFile:
        name = f"op-0-{next(names)}.{kind}"
        size, index = write_shared_file(shared, name, parts, JOB, (FOOTER, encode_index))
        return written_file(name, kind, size, index)

    t0 = time.perf_counter()
    backend = LmdbKeyedStateBackend(MAX_P, os.path.join(work, "source"), incremental=True, key_spec="LONG")
    backend.changes.max_deltas = args.deltas + 1  # type: ignore[union-attr]  # one chain: a base and every delta
    table = backend.table("counts", "value")
    for k in range(args.keys):
        table[k] = (k, 0)
    out = snapshot_keyed_incremental(backend, _Operator(), 1, write)()
    backend.notify_checkpoint_complete(1)
    step = max(1, args.keys // 100)
    for d in range(args.deltas):
        for k in range(d % step, args.keys, 100):  # 1 % of the keys
            table[k] = (k, d + 1)
        out = snapshot_keyed_incremental(backend, _Operator(), 2 + d, write)()
        backend.notify_checkpoint_complete(2 + d)
    backend.close()
    out.pop("_written", None)
    chain = out["chain"]
    fs = storage_fs(root)
    handle = f"{root}/chk-{1 + args.deltas}/op-0.state"
    fs.write_atomic(handle, b"")
    fs.write_atomic(f"{root}/chk-{1 + args.deltas}/{METADATA_FILE}", b"{}")  # completed: its chain may be read
    size = sum(f["size"] for f in chain)
    print(
        f"chain: {len(chain)} files ({sum(f['kind'] == 'base' for f in chain)} base), {size / 1e6:.1f} MB, {args.keys:,} keys; "
        f"written in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    origin = StateOrigin(JOB, 1 + args.deltas)
    threads = [int(t) for t in args.threads.split(",")]
    _writes(args, work, threads)
    times: dict[int, list[float]] = {t: [] for t in threads}
    for r in range(args.rounds):
        for t in threads if r % 2 == 0 else reversed(threads):
            target = LmdbKeyedStateBackend(MAX_P, os.path.join(work, f"restore-{r}-{t}"), key_spec="LONG")
            spec = OperatorRestore("op", 0, 1, 1, MAX_P, {0: handle})
            w0 = time.perf_counter()
            restore_keyed(
                target, _Operator(), {0: out}, spec,
                read_shared=lambda old, name, ranges: iter_shared_parts(handle, name, ranges, origin),
                transfer_threads=t,
            )
            times[t].append(time.perf_counter() - w0)
            restored = target.table("counts", "value")
            assert len(restored) == args.keys and restored[args.keys - 1] is not None
            target.close()
    _report("restore", times)



def _writes(args: Any, work: str, threads: list[int]) -> None:
    """Checkpoints written at the URL as a TaskManager writes them: an on-disk backend's rolled
    snapshots (a delta and, in its turns, a partial base of a few key groups rebased from the chain's
    files), their uploads handed to ``Uploads`` and waited for before the next checkpoint."""
    from millstream.engine.checkpoint.storage import read_shared_file, write_shared_file
    from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
    from millstream.engine.runtime.state.state_chain import FOOTER, SharedFile, encode_index, written_file
    from millstream.engine.runtime.state.state_uploader import Uploads
    from millstream.engine.runtime.state.task_state_manager import snapshot_keyed_incremental

    keys, checkpoints = args.keys, args.write_checkpoints
    times: dict[int, list[float]] = {t: [] for t in threads}
    files: dict[int, int] = {}
    for r in range(args.rounds):
        for t in threads if r % 2 == 0 else reversed(threads):
            job = f"{r:02d}{t:02d}" + "ef" * 14
            shared = f"s3://{BUCKET}/{job}/shared"
            names = iter(range(1 << 30))
            uploads = Uploads(t)

            def write(kind: str, parts: Any) -> SharedFile:
                name = f"op-0-{next(names)}.{kind}"
                size, index = write_shared_file(shared, name, parts, job, (FOOTER, encode_index), uploads.submit)
                return written_file(name, kind, size, index)

            def read(name: str, index: Any) -> Any:
                return read_shared_file(shared, name, index, job)

            backend = LmdbKeyedStateBackend(MAX_P, os.path.join(work, f"write-{r}-{t}"), incremental=True, key_spec="LONG")
            table = backend.table("counts", "value")
            elapsed = 0.0
            for c in range(1, checkpoints + 1):
                for k in range(c % 20, keys, 20):  # 5 % of the keys per checkpoint; all of them at the first
                    table[k] = (k, c)
                if c == 1:
                    for k in range(keys):
                        table[k] = (k, 0)
                w0 = time.perf_counter()
                snapshot_keyed_incremental(backend, _Operator(), c, write, read)()
                uploads.wait()
                elapsed += time.perf_counter() - w0
                backend.notify_checkpoint_complete(c)
            backend.close()
            times[t].append(elapsed)
            files[t] = next(names)
    _report(f"{checkpoints} checkpoints written ({max(files.values())} files)", times)


def _report(what: str, times: dict[int, list[float]]) -> None:
    """Each thread count's median, and its ratio to the first count's (the baseline, same run)."""
    first = next(iter(times))
    base = statistics.median(times[first])
    for t, runs in times.items():
        med = statistics.median(runs)
        print(
            f"{what}, {t} transfer thread{'s' if t > 1 else ''}: median {med:.2f} s ({', '.join(f'{x:.2f}' for x in runs)}); "
            f"{med / base:.2f} of {first}",
            flush=True,
        )


if __name__ == "__main__":
    main()
