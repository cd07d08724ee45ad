"""SharedStateRegistry: reference counts of the state files that incremental checkpoints share.

An incremental checkpoint writes only what changed since the last completed one, into files under
``<checkpoint dir>/<job>/shared/``, and refers to the earlier files of its chain by name (see
``millstream.engine.runtime.state.incremental``). A file may so belong to many retained checkpoints at once.
As in Flink's SharedStateRegistry, each retained checkpoint registers the names it refers to, and a
file is deleted only when the last retained checkpoint that refers to it is discarded.

The registry is pure bookkeeping (no I/O): the coordinator asks it which names to delete and hands
them to the JobMaster in a DiscardAction. It is rebuilt from the retained checkpoints' ``_metadata``
when a JobManager restarts, so a restart never deletes a file that a retained checkpoint still uses.
"""
from __future__ import annotations

import re
from typing import Iterable

SHARED_DIR = "shared"  # next to the chk-<n> directories of a job, as Flink's layout
# A shared file's name: never a path, so a name from _metadata cannot point outside the shared directory.
_NAME = re.compile(r"^[0-9A-Za-z._-]+\.(base|delta)$")


def is_shared_name(name: object) -> bool:
    return isinstance(name, str) and bool(_NAME.match(name)) and not name.startswith(".")


class SharedStateRegistry:
    """Which retained checkpoint refers to which shared file."""

    def __init__(self) -> None:
        self._refs: dict[str, set[int]] = {}  # file name -> ids of the retained checkpoints using it
        self._by_checkpoint: dict[int, frozenset[str]] = {}

    def register(self, checkpoint_id: int, names: Iterable[str]) -> None:
        """A checkpoint is retained (it completed, or was found in storage at a restart)."""
        names = frozenset(names)
        bad = [n for n in names if not is_shared_name(n)]
        if bad:
            raise ValueError(f"checkpoint {checkpoint_id} refers to a shared state file with an invalid name: {bad[0]!r}")
        self.unregister(checkpoint_id)  # registering twice counts once
        self._by_checkpoint[checkpoint_id] = names
        for n in names:
            self._refs.setdefault(n, set()).add(checkpoint_id)

    def unregister(self, checkpoint_id: int) -> list[str]:
        """A checkpoint is no longer retained: the files no retained checkpoint refers to any more,
        to be deleted (sorted)."""
        names = self._by_checkpoint.pop(checkpoint_id, frozenset())
        unused = []
        for n in names:
            users = self._refs.get(n)
            if users is None:
                continue
            users.discard(checkpoint_id)
            if not users:
                del self._refs[n]
                unused.append(n)
        return sorted(unused)

    def unused(self, names: Iterable[str]) -> list[str]:
        """Of ``names`` (e.g. the files a failed checkpoint wrote), those no retained checkpoint uses."""
        return sorted({n for n in names if is_shared_name(n) and n not in self._refs})

    def references(self, name: str) -> frozenset[int]:
        return frozenset(self._refs.get(name, ()))

    def __contains__(self, name: object) -> bool:
        return name in self._refs

    def __len__(self) -> int:
        return len(self._refs)
