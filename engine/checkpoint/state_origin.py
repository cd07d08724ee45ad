"""StateOrigin: the job and checkpoint a state file belongs to, which its MAC is bound to.

Pure data, shared by the restore plan (``rescale.TaskRestore``), which carries it to the tasks, and
the checkpoint storage, which checks every state file it opens against it (``storage``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StateOrigin:
    """What a state file belongs to, as its authenticated ``_metadata`` says: the job and checkpoint that
    wrote it. A reader learns it from the restore plan (never from the file's path, which whoever can
    write the storage chooses), so a genuine file copied into another checkpoint or job does not open.
    ``legacy``: the checkpoint was sealed by the previous release, whose MACs name only the file."""

    job_id: str
    checkpoint_id: int
    legacy: bool = False
