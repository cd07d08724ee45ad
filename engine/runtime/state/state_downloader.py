"""StateDownloader: a restore's reads of shared state files, several at a time (Flink's
``RocksDBStateDownloader`` and its ``state.backend.rocksdb.checkpoint.transfer.thread.num``).

An incremental chain is restored file after file, each file's parts of the subtask's key groups in
one request (``storage.iter_shared_parts``), and a file whose index is only in its footer costs one
more. Locally that is nothing; at a URL each request waits a round trip, and a chain of 170 files
(1 % of the keys changed per interval) waited 170 of them or more, one after another. The order in
which a replay reads is known before its first read (``state_chain.replay_reads``), so the
downloader reads the next files on a few threads while the replay applies the current one.

What it holds read ahead is bounded in bytes (``budget``): a restore of state larger than memory
still holds about one key group plus that. A read bigger than the budget is not read ahead; it is
read, streamed, when it is asked for. Reads are served in any order: one not read ahead (or asked
for twice) is read as it is asked for, so the downloader can only change when bytes arrive, never
which. An error of a read ahead is raised where that read is asked for, as it would have been.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Container, Iterable, Iterator, Mapping

from millstream.engine.checkpoint.filesystem import is_remote
from millstream.engine.runtime.state.state_chain import FOOTER, Chain, replay_reads, with_indexes

Ranges = list[tuple[int, int, int]]  # (key group, offset, length) of one file
ReadParts = Callable[[str, Ranges], Iterable[tuple[int, bytes]]]

TRANSFER_THREADS = "state.backend.rocksdb.checkpoint.transfer.thread.num"  # Flink's option, for both backends here
DEFAULT_THREADS = 4  # Flink's default for it
DEFAULT_BUDGET = 64 << 20  # bytes read ahead and not yet handed to the replay


def transfer_threads(config: Mapping[str, Any], handles: Iterable[Any]) -> int:
    """Reads at once for a restore from the state files ``handles``: the job's ``TRANSFER_THREADS``
    (at least 1; the default where it is absent or not a number) for files at a URL, where each
    read waits a round trip; 1 for local files, which have none to hide."""
    if not any(is_remote(str(h)) for h in handles):
        return 1
    try:
        return max(1, int(str(config.get(TRANSFER_THREADS, DEFAULT_THREADS)).strip()))
    except ValueError:
        return DEFAULT_THREADS


def _key(name: str, ranges: Ranges) -> tuple[str, tuple[tuple[int, int, int], ...]]:
    return name, tuple(map(tuple, ranges))  # type: ignore[arg-type]


class StateDownloader:
    """``read`` (a ``ReadParts``) with reads ahead: ``plan`` the reads in the order they will be asked
    for, then call the downloader as ``read`` itself. A context manager: leaving it drops what was
    read ahead and not asked for, and waits for the reads still running."""

    def __init__(self, read: ReadParts, threads: int = DEFAULT_THREADS, budget: int = DEFAULT_BUDGET) -> None:
        self._read = read
        self._threads = max(1, int(threads))
        self._budget = budget
        self._pool: ThreadPoolExecutor | None = None
        self._planned: deque[tuple[tuple, str, Ranges, int]] = deque()  # (key, name, ranges, bytes), in order
        self._ahead: dict[tuple, tuple[Future, int]] = {}  # reads in flight or done, not yet asked for
        self._held = 0  # bytes of ``_ahead``

    def __enter__(self) -> "StateDownloader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._planned.clear()
        for future, _ in self._ahead.values():
            future.cancel()
        self._ahead.clear()
        self._held = 0
        if self._pool is not None:
            # reads not started are dropped; the few running are waited for, so none outlives the restore
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def plan(self, reads: Iterable[tuple[str, Ranges]]) -> None:
        """The reads a replay will ask for next, in its order; reading ahead starts at once."""
        if self._threads <= 1:
            return  # one thread: reads as they are asked for, as without a downloader
        for name, ranges in reads:
            size = sum(length for _, _, length in ranges)
            if size <= self._budget:  # bigger: streamed when asked for, never held whole
                self._planned.append((_key(name, ranges), name, list(ranges), size))
        self._top_up()

    def __call__(self, name: str, ranges: Ranges) -> Iterable[tuple[int, bytes]]:
        key = _key(name, ranges)
        ahead = self._ahead.pop(key, None)
        if ahead is None:
            for i, planned in enumerate(self._planned):  # asked for before its turn: not read again
                if planned[0] == key:
                    del self._planned[i]
                    break
            return self._read(name, ranges)
        future, size = ahead
        try:
            return future.result()
        finally:
            self._held -= size
            self._top_up()

    def _top_up(self) -> None:
        while self._planned and len(self._ahead) < self._threads * 2:
            key, name, ranges, size = self._planned[0]
            if key in self._ahead:  # the same read planned twice: one read ahead serves the first ask
                self._planned.popleft()
                continue
            if self._ahead and self._held + size > self._budget:
                return  # within the budget once the replay has taken what is held
            self._planned.popleft()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="state-download")
            self._ahead[key] = (self._pool.submit(_read_all, self._read, name, ranges), size)
            self._held += size


def _read_all(read: ReadParts, name: str, ranges: Ranges) -> list[tuple[int, bytes]]:
    return list(read(name, ranges))


def with_indexes_ahead(chain: Chain, download: StateDownloader) -> Chain:
    """``state_chain.with_indexes`` with every footer it reads read ahead, together."""
    download.plan((f.name, [(FOOTER, *f.footer)]) for f in chain if not f.indexed)
    return with_indexes(chain, download)


def planned_reads(chain: Chain, owned: Container[int] | None) -> Iterator[tuple[str, Ranges]]:
    """The reads, in order, of a replay of ``chain`` for the key groups ``owned`` (``replay_reads``)."""
    return ((f.name, ranges) for _, f, ranges in replay_reads(chain, owned))
