"""What one subtask puts into a checkpoint and takes back out of one (Flink's TaskStateManager and
StreamTaskStateInitializer), as pure functions over already loaded snapshots.

Per operator a task writes one state file holding a dict:

* ``keyed``/``kinds`` (the keyed head only): ``{key group: {state name: [(key, value)]}}`` from the
  keyed backend, plus the operator's timers under ``_timers/<service>`` as ``[(key, [(domain, ts,
  timer key)])]``, so timers move with their key group when a job is rescaled, and any keyed state
  the operator holds itself (``keyed_tables``). The backends' own tables come whole: the heap
  backend's (snapshotted in a forked child) under ``tables`` (``{name: {key: value}}``), grouped by
  key group only when a rescaled restore needs it; the on-disk backend's under ``records`` as raw
  records in key-group order (``state_records``), sliced by key group on restore (the on-disk
  backend's restore puts them in part by part as the file is read, ``stream_task._read_state_into``,
  and replays a ``chain`` likewise, ``incremental.replay_into``: issue 16). Either backend restores both; ``kinds`` also records the key encoding that grouped
  the keys (``KEY_ENCODING_FIELD``; absent: version 1, whose keys are regrouped on restore);
* ``chain`` (the on-disk backend with incremental checkpoints, instead of ``records``): the files in
  the job's ``shared/`` directory its state is rebuilt from, a base and the deltas after it
  (``incremental``); a restore replays the parts of the key groups it owns;
* ``heap_chain`` (the heap backend with incremental checkpoints): the same, in the heap backend's
  format (``heap_incremental``): the parts of the key groups owned are replayed into tables that go
  in as the subtask's own (a chain with a file written before its files were grouped: replayed
  whole, restored as ``tables`` are);
* ``operator``: the operator's own ``snapshot_state()`` (a list is split evenly on rescale, anything
  else is copied, like broadcast state);
* ``function``: a CheckpointedFunction's operator list and union list states;
* ``splits`` (a source only): its reader position, a list of split states.
"""
from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from millstream.engine.checkpoint.rescale import (
    OperatorRestore,
    OperatorSubtaskState,
    StateRestoreError,
    redistribute_splits,
    regroup_keyed,
    split_operator_state,
)
from millstream.engine.runtime.key_group_batch import assign_to_key_groups, key_grouper
from millstream.engine.runtime.key_groups import KEY_ENCODING_VERSION, assign_to_key_group, key_group_range
from millstream.engine.runtime.state.heap_state_files import merge, rebase, replay_key_groups
from millstream.engine.runtime.state.incremental import (
    encode_groups,
    encode_parts,
    grouped,
    merge_groups,
    rebase_groups,
    replay,
    replay_into,
)
from millstream.engine.runtime.state.key_grouped_state import RECORD_GROUPS
from millstream.engine.runtime.state.state_chain import (
    BASE,
    DELTA,
    Chain,
    SharedFile,
    chain_from_wire,
    chain_to_wire,
    extend,
    with_indexes,
)
from millstream.engine.runtime.state.rolled_compaction import roll
from millstream.engine.runtime.state.state_downloader import StateDownloader, planned_reads, with_indexes_ahead
from millstream.engine.runtime.state.operator_state import UNION, redistribute_operator_state
from millstream.engine.runtime.state.state_records import (
    RECORD_KEYS_FIELD,
    RECORD_KEYS_VERSION,
    decode_record,
    key_group_prefix,
    record_keys_of,
)

TIMERS_PREFIX = "_timers/"
# Set by the restore on a heap chain replayed from grouped files: its ``tables`` hold only this subtask's key groups.
_TABLES_OWNED = "_tables_owned"
KEY_ENCODING_FIELD = "_key_encoding/version"  # in ``kinds``, never a state name (reserved prefix)


def _versioned_kinds(backend: Any) -> dict[str, str]:
    """The kinds of ``backend``'s tables, with the versions of the encodings its snapshot uses."""
    kinds = dict(backend.kinds)
    kinds[KEY_ENCODING_FIELD] = str(KEY_ENCODING_VERSION)
    kinds[RECORD_KEYS_FIELD] = str(RECORD_KEYS_VERSION)
    return kinds


def snapshot_keyed(backend: Any, operator: Any) -> tuple[dict[int, dict[str, list]], dict[str, str]]:
    """The keyed head's state and timers by key group, and the kind of every state table."""
    keyed = backend.snapshot_by_key_group()
    own, own_kinds = _operator_keyed(backend, operator)
    for kg, groups in own.items():
        mine = keyed.setdefault(kg, {})
        for name, entries in groups.items():
            mine.setdefault(name, []).extend(entries)
    kinds = _versioned_kinds(backend)
    kinds.update(own_kinds)
    return keyed, kinds


def snapshot_keyed_tables(backend: Any, operator: Any, by_key_group: bool = False) -> dict[str, Any]:
    """The heap backend's snapshot, taken in its forked child: its tables whole under ``tables``
    ({name: {key: value}}, which pickles at C speed, several times faster than grouping every key
    by key group first), timers and the operator's own tables by key group under ``keyed``. Key groups
    of ``tables`` are resolved at restore, and only when the parallelism changed. ``by_key_group``
    (savepoints, which are restored at other parallelisms): the tables go into ``keyed`` too, grouped
    here, so the state file holds a part per key group and a restore reads only its own."""
    if by_key_group:
        keyed, kinds = snapshot_keyed(backend, operator)
        return {"keyed": keyed, "kinds": kinds}
    keyed, own_kinds = _operator_keyed(backend, operator)
    kinds = _versioned_kinds(backend)
    kinds.update(own_kinds)
    return {"keyed": keyed, "kinds": kinds, "tables": backend.tables}


def snapshot_keyed_async(backend: Any, operator: Any, streamed: bool = False) -> Callable[[], dict[str, Any]]:
    """The snapshot of a backend with its own point-in-time view (``begin_snapshot``, the on-disk
    one), in two parts: on the task thread the timers and the operator's own keyed tables (small,
    pickled now so later changes cannot leak in) and the backend's view; the returned callable
    completes it on another thread as ``{"keyed", "kinds", "records"}``, ``records`` being
    ``{name: [(LMDB key, record)]}`` in key-group order. ``streamed`` (the checkpoint writer): instead
    of ``records`` the result holds under ``RECORD_GROUPS`` the callable that hands them to
    ``encode_state_parts`` a key group at a time, so they are never all in memory."""
    import pickle

    streamed = streamed and hasattr(backend, "begin_snapshot_parts")
    read = backend.begin_snapshot_parts() if streamed else backend.begin_snapshot()
    own = pickle.dumps(_operator_keyed(backend, operator), protocol=pickle.HIGHEST_PROTOCOL)
    kinds = _versioned_kinds(backend)

    def finish() -> dict[str, Any]:
        keyed, kinds_own = pickle.loads(own)
        out = {"keyed": keyed, "kinds": {**kinds, **kinds_own}}
        # streamed: the writer reads the records a key group at a time as it writes the file
        # (``RECORD_GROUPS``), so state larger than memory is checkpointed
        out[RECORD_GROUPS if streamed else "records"] = read if streamed else read()
        return out

    return finish


def snapshot_keyed_incremental(
    backend: Any,
    operator: Any,
    checkpoint_id: int,
    write_file: Callable[[str, list[tuple[int, bytes]]], SharedFile],
    read_file: Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]] | None = None,
) -> Callable[[], dict[str, Any]]:
    """As ``snapshot_keyed_async`` for an incremental backend (``begin_incremental_snapshot``): the
    callable, on the writer thread, reads the base or delta, hands it to ``write_file(kind, parts)``
    (a new file in the job's shared directory) and returns ``{"keyed", "kinds", "chain"}``. With
    ``read_file(name, index)`` (the job's shared files) a chain that reached its length first merges
    its newest deltas into one file (``SnapshotPlan.merge_from``, ``incremental.merge_groups``)
    instead of the backend writing every record again as a base."""
    import pickle

    streamed = hasattr(backend, "begin_incremental_snapshot_parts")
    if streamed:
        plan, read = backend.begin_incremental_snapshot_parts(checkpoint_id, merge=read_file is not None)
    else:
        plan, read = backend.begin_incremental_snapshot(checkpoint_id)
    own = pickle.dumps(_operator_keyed(backend, operator), protocol=pickle.HIGHEST_PROTOCOL)
    kinds = _versioned_kinds(backend)
    kind = BASE if plan.is_base else DELTA

    def counting(groups: Iterable[tuple[int, Mapping[str, list]]], counted: list[int]) -> Iterator[tuple[int, Mapping[str, list]]]:
        # records and deletions, for the base rule (``ChangeTracker._due_for_base``)
        for kg, tables in groups:
            counted[0] += sum(len(rows) for rows in tables.values())
            yield kg, tables

    def finish() -> dict[str, Any]:
        keyed, kinds_own = pickle.loads(own)
        out: dict[str, Any] = {"keyed": keyed, "kinds": {**kinds, **kinds_own}}
        if plan.rolled and streamed and read_file is not None:
            return rolled(out)
        start = plan.merge_from if read_file is not None else None
        merged = None
        if start is not None:
            # Merged before this delta is written: a file of the chain already deleted (its checkpoint
            # subsumed meanwhile) fails this checkpoint before any file is complete (the atomic write
            # removes the merged file's unfinished copy).
            n = [0]
            merged = write_file(DELTA, encode_groups(counting(merge_groups(plan.parent[start:], read_file), n)))  # type: ignore[arg-type]
            merged = replace(merged, entries=n[0])
        counted = [0]
        if streamed:  # written a key group at a time inside the read transaction, never whole
            new = read(lambda groups: write_file(kind, encode_groups(counting(groups, counted))))
        else:
            records = read()
            counted[0] = sum(len(rows) for rows in records.values())
            new = write_file(kind, encode_parts(records))
        new = replace(new, entries=counted[0])
        chain = extend(plan, new, merged)
        if merged is not None:
            out["_written"] = merged.size + new.size
        backend.changes.written(checkpoint_id, chain)
        out["chain"] = chain_to_wire(chain)
        return out

    def rolled(out: dict[str, Any]) -> dict[str, Any]:
        # the delta from the tracker's records (in memory), and the partial base from them and the files
        parent = grouped(with_indexes(plan.parent, read_file))  # type: ignore[arg-type]
        counted = [0]
        groups = read(list)
        parts = list(encode_groups(counting(groups, counted)))

        def based(due: list[int]) -> tuple[list[tuple[int, bytes]], int]:
            records = list(rebase_groups(parent, dict(groups), read_file, due))  # type: ignore[arg-type]
            return list(encode_groups(records)), sum(len(rows) for _, tables in records for rows in tables.values())

        chain = _write_rolled(backend, checkpoint_id, parent, parts, counted[0], plan.live, based, write_file, out)
        backend.changes.written(checkpoint_id, chain)
        out["chain"] = chain_to_wire(chain)
        return out

    return finish


def snapshot_heap_incremental(
    backend: Any,
    operator: Any,
    checkpoint_id: int,
    write_file: Callable[[str, list[tuple[int, bytes]]], SharedFile],
    read_file: Callable[[str, list[tuple[int, int, int]]], list[tuple[int, bytes]]] | None = None,
    whole: bool = False,
) -> Callable[[], dict[str, Any]]:
    """The heap backend's incremental snapshot (``begin_incremental_snapshot``), taken at the barrier:
    returns ``complete()``, which runs on the writer thread (it reads the changed entries through
    their copy-on-write view) and returns ``{"keyed", "kinds", "heap_chain"}``, writing its files with
    ``write_file(kind, parts)``. Where a base is due (no completed chain to build on: after an aborted
    checkpoint or a cleared table) the delta holds every key, on the empty chain; no base is forked.
    With ``read_file(name, index)`` (the parts of a file of this job's chain) the writer merges the
    newest files of the last completed chain (or all of them, into a new base) from the files, as
    ``SnapshotPlan.merge_from`` says, before it writes the delta: the chain is [..., merged, delta],
    and ``"_written"`` in the result is the bytes of both new files.

    ``whole`` (checkpoints that are not incremental, ``HeapKeyedStateBackend.whole``): the snapshot is
    one whole base, every key group of the last completed chain merged with the delta on the writer
    thread (``rebase``); with no completed chain (after an aborted checkpoint, a cleared table or a
    restore) the delta is of every key on the empty chain, or of the keys restored, which are
    tracked changes, and is merged into a whole base alike."""
    import pickle

    live = sum(len(t) for t in backend.tables.values())
    plan, read = backend.begin_incremental_snapshot(checkpoint_id, compact=read_file is not None, live=live, fork_bases=False)
    assert read is not None, "a delta is always read on the writer thread"
    kinds = _versioned_kinds(backend)
    key_groups = key_grouper(backend.max_parallelism, getattr(backend, "key_spec", None))  # files grouped by key group (change 8)
    own = pickle.dumps(_operator_keyed(backend, operator), protocol=pickle.HIGHEST_PROTOCOL)

    def delta() -> dict[str, Any]:
        keyed, kinds_own = pickle.loads(own)
        out: dict[str, Any] = {"keyed": keyed, "kinds": {**kinds, **kinds_own}}
        # The delta first: until it is read, the task thread saves the barrier value of each changed
        # key it touches (copy-on-write), so it is read before anything slower runs.
        parts = read()  # detaches the copy-on-write views
        # the parent's indexes, where only their files hold them (``SharedFile.footer``); read before
        # anything is written, as what follows is
        here = replace(plan, parent=with_indexes(plan.parent, read_file)) if read_file is not None else plan
        if here.rolled and read_file is not None and getattr(parts, "grouped", False):
            # (``whole`` past here only on a restored chain of files not grouped by key group, written
            # before issue 16's change 8: this checkpoint is then a delta on it, as an incremental one)
            return (whole_base if whole else rolled)(here.parent, parts, out)
        # Some of the parent chain's files as one, from the files themselves: the chain stays short
        # without forking the task process. Read before anything is written, so a missing file (the
        # chain's checkpoint subsumed meanwhile) fails this checkpoint leaving no file behind; the
        # tracker then starts a new chain (a delta of every key).
        start = here.merge_from if read_file is not None else None
        merged = merge(here.parent[start:], read_file, start == 0, key_groups) if start is not None else None  # type: ignore[arg-type]
        new = replace(write_file(DELTA, parts), entries=getattr(parts, "entries", -1), grouped=getattr(parts, "grouped", False))
        one = None
        if merged is not None:
            one = replace(write_file(BASE if start == 0 else DELTA, merged), entries=merged.entries, grouped=merged.grouped)
            out["_written"] = one.size + new.size
        chain = extend(here, new, one)
        backend.changes.written(checkpoint_id, chain)
        out["heap_chain"] = chain_to_wire(chain)
        return out

    def rolled(parent: Chain, parts: Any, out: dict[str, Any]) -> dict[str, Any]:
        def based(due: list[int]) -> tuple[list[tuple[int, bytes]], int]:
            rebased = rebase(parent, parts, read_file, due)  # type: ignore[arg-type]
            return rebased, rebased.entries

        chain = _write_rolled(backend, checkpoint_id, parent, parts, parts.entries, live, based, write_file, out)
        backend.changes.written(checkpoint_id, chain)
        out["heap_chain"] = chain_to_wire(chain)
        return out

    def whole_base(parent: Chain, parts: Any, out: dict[str, Any]) -> dict[str, Any]:
        # every key group the parent or the delta holds: the new file alone is the checkpoint's state
        due = sorted({r[0] for f in parent for r in f.index if r[0] >= 0} | {kg for kg, _ in parts})
        merged = rebase(parent, parts, read_file, due)  # type: ignore[arg-type]
        new = replace(write_file(BASE, merged), entries=merged.entries, grouped=True)
        backend.changes.written(checkpoint_id, (new,))
        out["heap_chain"] = chain_to_wire((new,))
        return out

    return delta


def _write_rolled(
    backend: Any,
    checkpoint_id: int,
    parent: Chain,
    parts: list[tuple[int, bytes]],
    entries: int,
    live: int | None,
    based: Callable[[list[int]], tuple[list[tuple[int, bytes]], int]],
    write_file: Callable[[str, list[tuple[int, bytes]]], SharedFile],
    out: dict[str, Any],
) -> Chain:
    """A rolled snapshot's files (either backend's): the delta ``parts`` (``entries`` of them) and, for
    the key groups due in checkpoint ``checkpoint_id`` (``backend.rolled``, ``rolled_compaction``: in
    this subtask's turn), the partial base ``based(due)``
    (its parts and entries), built from the parent's files before either file is written: a file of
    the chain deleted meanwhile fails this checkpoint leaving nothing behind. Returns the new chain;
    ``"_written"`` in ``out`` is the bytes of both files when there are two.

    The delta file leaves out the parts of the key groups rebased: the partial base follows it in the
    chain and holds their state after the delta, so no replay would read them (where much changes per
    interval, a turn rebases most of a subtask's key groups and those parts were a third of the bytes)."""
    size = sum(len(p) for _, p in parts)
    pending = SharedFile("", DELTA, size, tuple((kg, 0, len(p)) for kg, p in parts), entries, grouped=True)
    due = backend.rolled.choose((*parent, pending), size, live, checkpoint_id)
    rebased = based(due) if due else None
    if due:
        covered = frozenset(due)
        parts = [(kg, p) for kg, p in parts if kg not in covered]
        kept = sum(len(p) for _, p in parts)
        entries = entries if entries < 0 or kept == size else round(entries * kept / max(1, size))  # by bytes: a guess, as the chain's policy weighs them
    new = replace(write_file(DELTA, parts), entries=entries, grouped=True) if parts or rebased is None else None
    one = None
    if rebased is not None:
        one = replace(write_file(BASE, rebased[0]), entries=rebased[1], grouped=True, partial=True)
        backend.rolled.written(one.size)
        out["_written"] = one.size + (new.size if new is not None else 0)
    if new is None:  # every key group it changed was rebased: the partial base alone
        return roll(parent, one, None)  # type: ignore[arg-type]
    return roll(parent, new, one)


def shared_files_of(state: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the shared files an operator's state dict refers to (for the acknowledgement)."""
    return tuple(f["name"] for f in (state.get("chain") or state.get("heap_chain") or ()))


def _operator_keyed(backend: Any, operator: Any) -> tuple[dict[int, dict[str, list]], dict[str, str]]:
    """Timers and the operator's own keyed tables by key group, and the kinds of those tables."""
    max_p, spec = backend.max_parallelism, getattr(backend, "key_spec", None)

    def key_group_of(key: Any) -> int:
        return assign_to_key_group(key, max_p, spec)

    keyed: dict[int, dict[str, list]] = {}
    for name, service in operator.timer_services().items():
        for kg, entries in service.snapshot_by_key_group(key_group_of).items():
            keyed.setdefault(kg, {})[TIMERS_PREFIX + name] = entries
    kinds: dict[str, str] = {}
    for name, (kind, pairs) in operator.keyed_tables().items():
        kinds[name] = kind
        for key, value in pairs:
            keyed.setdefault(key_group_of(key), {}).setdefault(name, []).append((key, value))
    return keyed, kinds


def restore_keyed(
    backend: Any,
    operator: Any,
    loaded: Mapping[int, Mapping[str, Any]],
    spec: OperatorRestore,
    read_peer: Callable[[Any], Mapping[str, Any]] | None = None,
    read_shared: Callable[[int, str, list[tuple[int, int, int]]], list[tuple[int, bytes]]] | None = None,
    may_resume: bool = False,
    transfer_threads: int = 1,
) -> None:
    """Fill an opened keyed head's backend and timer services with this subtask's key groups.
    State grouped by an older key encoding is regrouped key by key, from every old subtask's file:
    at an unchanged parallelism the others' files are read too (``read_peer``). An incremental
    snapshot's chain is replayed for the key groups owned, its parts read by
    ``read_shared(old subtask, file name, [(key group, offset, length)])``. ``may_resume``: the state
    comes from this job's own checkpoint directory, so an incremental backend that got back exactly
    one chain may extend it with its next delta. ``transfer_threads``: reads of a chain's files at
    once (``state_downloader``: for files at a URL; 1, the default: one after another)."""
    resumable = None  # the chain this subtask's next delta may extend: its own, restored exactly
    if any(st.get("heap_chain") for st in loaded.values()):
        if read_shared is None:
            raise StateRestoreError("this state refers to incremental checkpoint files, and nothing reads them here")
        expanded = {}
        mine = key_group_range(spec.max_parallelism, spec.parallelism, spec.subtask)
        for old, st in loaded.items():
            if st.get("heap_chain"):
                read = lambda name, index, old=old: read_shared(old, name, index)  # noqa: E731
                with StateDownloader(read, transfer_threads) as download:
                    chain = with_indexes_ahead(chain_from_wire(st["heap_chain"]), download)
                    # a grouped chain: only the parts of the key groups this subtask owns are read
                    download.plan(planned_reads(chain, mine))
                    tables, only_mine = replay_key_groups(chain, download, mine)
                st = {**st, "tables": tables, _TABLES_OWNED: only_mine}
                if spec.parallelism == spec.old_parallelism and old == spec.subtask and set(loaded) == {old}:
                    resumable = chain
            expanded[old] = st
        loaded = expanded
    loaded, whole, records = _expand_tables(loaded, spec, getattr(backend, "key_spec", None))
    owned = key_group_range(spec.max_parallelism, spec.parallelism, spec.subtask)
    put_records = getattr(backend, "restore_records", None)
    for old, st in sorted(loaded.items()):
        if not st.get("chain"):
            continue
        if read_shared is None:
            raise StateRestoreError("this state refers to incremental checkpoint files, and nothing reads them here")
        read = lambda name, ranges, old=old: read_shared(old, name, ranges)  # noqa: E731
        with StateDownloader(read, transfer_threads) as download:
            chain = with_indexes_ahead(chain_from_wire(st["chain"]), download)
            download.plan(planned_reads(grouped(chain), owned))
            if put_records is not None:
                # The on-disk backend: each part goes into LMDB as it is read, deltas applied over the base
                # in order, so no more than a key group's records (and what is read ahead) is in memory (issue 16)
                kinds_of = st.get("kinds") or {}
                version = record_keys_of(kinds_of)
                replay_into(
                    chain, owned, download, lambda name, rows, delta: put_records(name, kinds_of.get(name, "value"), rows, delta, version)
                )
            else:
                records.extend((name, rows, record_keys_of(st.get("kinds"))) for name, rows in replay(chain, owned, download).items())
        if spec.parallelism == spec.old_parallelism and old == spec.subtask and set(loaded) == {old}:
            resumable = chain
    if any(key_encoding_of(st) < KEY_ENCODING_VERSION for st in loaded.values()):
        loaded = dict(loaded)
        if spec.peer_handles and set(loaded) == {spec.subtask}:
            read = read_peer or _read_state_file
            for i, handle in sorted(spec.peer_handles.items()):
                if i not in loaded:
                    loaded[i] = read(handle) or {}
        keyed = regroup_keyed(
            [loaded[i].get("keyed") or {} for i in sorted(loaded)],
            spec.key_groups,
            spec.max_parallelism,
            TIMERS_PREFIX,
            getattr(backend, "key_spec", None),
        )
        share = OperatorSubtaskState(keyed=keyed)
    else:
        share = spec.restore({old: OperatorSubtaskState(keyed=st.get("keyed") or {}) for old, st in loaded.items()})
    kinds: dict[str, str] = {}
    for st in loaded.values():
        kinds.update(st.get("kinds") or {})
    kinds.pop(KEY_ENCODING_FIELD, None)
    kinds.pop(RECORD_KEYS_FIELD, None)
    services = operator.timer_services()
    for groups in share.keyed.values():
        for name, entries in groups.items():
            if name.startswith(TIMERS_PREFIX):
                service = services.get(name[len(TIMERS_PREFIX) :])
                if service is None:
                    raise StateRestoreError(
                        f"the state of '{operator.ctx.operator_name}' holds timers ('{name}') but the operator "
                        "has no timer service of that name"
                    )
                for _key, timers in entries:
                    service.restore_timers(timers)
                continue
            backend.table(name, kinds.get(name, "value")).update(entries)  # a dict's: at C speed
    for tables in whole:  # this subtask's own tables at an unchanged parallelism: every key is its own
        for name, entries in tables.items():
            backend.table(name, kinds.get(name, "value")).update(entries)
    for name, rows, version in records:  # raw records of the on-disk backend: put back as they are, or decoded
        kind = kinds.get(name, "value")
        if put_records is not None:
            put_records(name, kind, rows, False, version)
            continue
        table = backend.table(name, kind)
        for lk, vb in rows:
            key, value = decode_record(lk, vb)
            table[key] = value
    resume = getattr(backend, "resume_incremental", None)
    if may_resume and resume is not None and resumable is not None and _chain_fits(backend, resumable, loaded):
        # The backend holds exactly the chain's state: its next checkpoint may be a delta on it,
        # rather than a base of everything (the chain's files stay while a retained checkpoint uses them).
        resume(resumable)


def _chain_fits(backend: Any, chain: Any, loaded: Mapping[int, Mapping[str, Any]]) -> bool:
    """Whether ``chain`` is in the format of ``backend``'s own incremental checkpoints (a heap chain
    restored onto the on-disk backend, or the reverse, must start a new base)."""
    st = next(iter(loaded.values()))
    heap = hasattr(backend, "snapshot_in_fork") and getattr(backend, "snapshot_in_fork")
    if not heap and record_keys_of(st.get("kinds")) < RECORD_KEYS_VERSION:
        return False  # its files hold keys in the older encoding: a delta on them would hold an int twice
    return bool(st.get("heap_chain")) == bool(heap)


def _expand_tables(
    loaded: Mapping[int, Mapping[str, Any]], spec: OperatorRestore, key_spec: Any = None
) -> tuple[dict[int, Mapping[str, Any]], list[Mapping[str, Any]], list[tuple[str, list, int]]]:
    """Take apart snapshots that hold a backend's state whole rather than by key group.

    ``tables`` (the heap backend's): the subtask's own, at an unchanged parallelism, or a grouped
    heap chain's replay of this subtask's key groups, is returned to be put back as it is; of any
    other file's tables every key is hashed (in batches, ``key_group_batch``) and the entries of the
    key groups this subtask owns are put back likewise. ``records`` (the on-disk backend's, sorted by key group):
    the slice of the key groups this subtask owns, found by bisection, no record decoded."""
    out: dict[int, Mapping[str, Any]] = {}
    whole: list[Mapping[str, Any]] = []
    records: list[tuple[str, list, int]] = []  # (name, rows, version of their keys)
    owned = key_group_range(spec.max_parallelism, spec.parallelism, spec.subtask)
    for i, st in loaded.items():
        own = spec.parallelism == spec.old_parallelism and i == spec.subtask
        for name, rows in (st.get("records") or {}).items():
            if not own:
                lo = bisect.bisect_left(rows, (key_group_prefix(owned.start),))
                hi = bisect.bisect_left(rows, (key_group_prefix(owned.stop),)) if owned.stop < spec.max_parallelism else len(rows)
                rows = rows[lo:hi]
            if rows:
                records.append((name, rows, record_keys_of(st.get("kinds"))))
        tables = st.get("tables")
        if not tables:
            out[i] = st
            continue
        if own or st.get(_TABLES_OWNED):  # every key is this subtask's: nothing to hash
            whole.append(tables)
            out[i] = st
            continue
        # another subtask's tables whole: every key hashed (in batches, ``key_group_batch``) to keep this
        # subtask's, which go in as its own tables do
        whole.append({name: _owned_entries(table, owned, spec.max_parallelism, key_spec) for name, table in tables.items()})
        out[i] = st
    return out, whole, records


def _owned_entries(table: Mapping[Any, Any], owned: range, max_parallelism: int, key_spec: Any) -> dict[Any, Any]:
    """The entries of ``table`` whose keys fall in the key groups ``owned``."""
    keys = list(table.keys())
    kgs = assign_to_key_groups(keys, max_parallelism, key_spec)
    picked = np.flatnonzero((kgs >= owned.start) & (kgs < owned.stop)).tolist()
    if not picked:
        return {}
    mine = [keys[j] for j in picked]
    return dict(zip(mine, map(table.__getitem__, mine)))


def key_encoding_of(state: Mapping[str, Any]) -> int:
    """The key encoding a keyed snapshot was grouped by (1 before it was recorded)."""
    return int((state.get("kinds") or {}).get(KEY_ENCODING_FIELD, 1))


def _read_state_file(handle: Any) -> Mapping[str, Any]:
    # Only for restoring state of key encoding 1, which needs every old subtask's file, in a process that
    # does not seal (a sealing one passes ``read_peer``, which names the checkpoint); the storage
    # import stays local so the rest of this module remains free of I/O.
    from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage
    from millstream.engine.runtime.state.key_grouped_state import decode_state

    return decode_state(FileSystemCheckpointStorage.read_state_file(handle))


def restore_operator_state(loaded: Mapping[int, Mapping[str, Any]], spec: OperatorRestore) -> Any:
    """The argument of ``restore_state``: its own at an unchanged parallelism; else lists split evenly
    across the new subtasks, or one old subtask's copy of anything that is not a list."""
    if spec.parallelism == spec.old_parallelism:
        own = loaded.get(spec.subtask)
        return None if own is None else own.get("operator")
    olds = [loaded[i].get("operator") for i in sorted(loaded)]
    present = [o for o in olds if o is not None]
    if not present:
        return None
    if all(isinstance(o, list) for o in present):
        return split_operator_state([{"state": o} for o in present], spec.parallelism)[spec.subtask]["state"]
    source = loaded.get(spec.subtask % spec.old_parallelism)
    if source is None or source.get("operator") is None:
        return present[0]
    return source.get("operator")


def restore_function_state(
    loaded: Mapping[int, Mapping[str, Any]], spec: OperatorRestore, read_peer: Callable[[Any], Mapping[str, Any]]
) -> Any:
    """A CheckpointedFunction's operator state for this subtask, or None (then it starts fresh).
    Union list state goes whole to every subtask: at an unchanged parallelism, where a subtask loaded
    only its own file, the other subtasks' files are read (``read_peer``) for it, only when there is any."""
    old = [(loaded.get(i) or {}).get("function") for i in range(spec.old_parallelism)]
    state = redistribute_operator_state(old, spec.subtask, spec.parallelism)
    if state is not None and state.get(UNION) and spec.peer_handles and set(loaded) == {spec.subtask}:
        union: dict[str, list] = {}
        for i, handle in sorted(spec.peer_handles.items()):
            fn = ((loaded[i] if i in loaded else read_peer(handle)) or {}).get("function") or {}
            for name, items in (fn.get(UNION) or {}).items():
                union.setdefault(name, []).extend(items)
        state[UNION] = union
    return state


def restore_splits(loaded: Mapping[int, Mapping[str, Any]], spec: OperatorRestore, source: Any = None) -> list[Any] | None:
    """A source's splits to resume: its own, or after a rescale what the source's
    ``redistribute_splits`` gives it (by default an even share of every old subtask's)."""
    positions = {i: st.get("splits") for i, st in loaded.items() if "splits" in st}
    if not positions and any("position" in st for st in loaded.values()):
        raise StateRestoreError(
            "the checkpoint records source positions in the format before split lists; it cannot be resumed"
        )
    custom = getattr(source, "redistribute_splits", None)
    if custom is not None and positions:
        return custom(positions, spec.subtask, spec.parallelism, spec.old_parallelism)
    return redistribute_splits(positions, spec.subtask, spec.parallelism, spec.old_parallelism)
