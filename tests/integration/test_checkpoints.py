"""Checkpoints on a real cluster: barriers, alignment, asynchronous snapshots, acks and REST statistics."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from millstream.engine.checkpoint.storage import read_shared_file
from millstream.engine.datastream.connectors.number_seq import split_range
from millstream.engine.runtime.state.heap_state_files import replay_tables
from millstream.engine.runtime.state.key_grouped_state import decode_state
from millstream.engine.runtime.state.state_chain import chain_from_wire, with_indexes
from millstream.engine.security.mac import HEADER_BYTES
from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "checkpointed_count.py"
N = 60_000


def job_id(output: str) -> str:
    return re.findall(r"^Job ([0-9a-f]{32}) ", output, re.M)[0]


def load_checkpoint(directory: Path) -> tuple[dict[int, list[list[int]]], dict[str, int]]:
    """Source splits still to read per subtask (``[[next, end], ...]``) and the keyed counts, read
    straight from the state files (named ``<operator>-<vertex>-<subtask>.state``)."""
    positions: dict[int, list[list[int]]] = {}
    counts: dict[str, int] = {}
    for f in directory.glob("*.state"):
        subtask = int(f.stem.rsplit("-", 1)[1])
        state = decode_state(f.read_bytes()[HEADER_BYTES:])  # sealed with the cluster secret (engine/security/mac.py)
        if "splits" in state:
            positions[subtask] = state["splits"]
        for groups in (state.get("keyed") or {}).values():
            for key, value in groups.get("_reduce", []):
                counts[key] = value[1]
        for key, value in ((state.get("tables") or {}).get("_reduce") or {}).items():  # the heap backend's
            counts[key] = value[1]
        if state.get("heap_chain"):  # the heap backend's full checkpoint: one whole file in shared/
            counts.update((k, v[1]) for k, v in _replayed(directory, state["heap_chain"]).get("_reduce", {}).items())
    return positions, counts


def _replayed(chk: Path, wire: list) -> dict:
    """The tables of a heap chain as the restore reads them (this process has no cluster secret, so
    the files' seals are skipped unchecked, as for the state files above)."""
    job_dir = chk.parent

    def read(name: str, ranges: list) -> list:
        return read_shared_file(str(job_dir / "shared"), name, ranges, job_dir.name)

    return replay_tables(with_indexes(chain_from_wire(wire), read), read)


def test_every_completed_checkpoint_is_a_consistent_cut(cluster: Cluster) -> None:
    res = cluster.run(PROGRAM, str(N), "15000", options=("-p", "2"), timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    jid = job_id(res.stdout)
    stats = cluster.http.get(f"/jobs/{jid}/checkpoints").json()
    assert stats["counts"]["completed"] >= 3, stats["counts"]
    done = [h for h in stats["history"] if h["status"] == "COMPLETED"]
    assert all(h["num_acknowledged_subtasks"] == h["num_subtasks"] == 4 for h in done)
    assert all(h["state_size"] > 0 for h in done)
    assert cluster.http.get(f"/jobs/{jid}/checkpoints/config").json()["mode"] == "exactly_once"
    detail = cluster.http.get(f"/jobs/{jid}/checkpoints/details/{done[0]['id']}").json()
    assert detail["id"] == done[0]["id"]

    job_dir = Path(cluster.env["MILLSTREAM_DATA_DIR"]) / "checkpoints" / jid
    # Retained: the newest 3, older ones deleted. Waited for rather than raced: a checkpoint still in
    # flight when the job finishes is aborted and its directory deleted just after the job's status
    # turns FINISHED (JobMaster.check_completion, then JobCheckpointing.on_terminal), and a CI run under
    # load once listed that fourth directory in between.
    cluster.wait_for(lambda: len(list(job_dir.glob("chk-*"))) <= 3, 15, "retention to delete the oldest checkpoints")
    kept = sorted(job_dir.glob("chk-*"))
    assert 1 <= len(kept) <= 3, kept
    for chk in kept:
        assert (chk / "_metadata").exists()
        meta = json.loads((chk / "_metadata").read_bytes()[HEADER_BYTES:])  # sealed like the state files
        assert meta
        positions, counts = load_checkpoint(chk)
        assert sorted(positions) == [0, 1]
        # the generator's subtask i reads its own contiguous index range [lo, hi); what is left of it
        # is in its splits
        emitted = sum(
            (hi - lo) - sum(end - nxt for nxt, end in positions[sub])
            for sub, (lo, hi) in ((sub, split_range(0, N - 1, sub, 2)) for sub in positions)
        )
        # Exactly once: the counts in the snapshot cover exactly the records read before the barrier.
        assert sum(counts.values()) == emitted, (chk.name, sum(counts.values()), emitted)
