"""Apache Flink's own PyFlink (the ``apache-flink`` distribution) installed next to Millstream.

Millstream installs no ``pyflink`` directory, so the two distributions share no file: each
installs and uninstalls without touching the other's. The ``pyflink`` name goes to whichever is
importable first: apache-flink's package when it is on the path, Millstream's alias otherwise (the
fallback finder ``millstream-pyflink.pth`` installs, ``_millstream_pyflink``, stands aside). So a
plain ``python program.py`` runs on real PyFlink while apache-flink is installed, whereas
``millstream run`` puts Millstream's alias first and runs the program on Millstream either way. The
CLI says so instead of leaving users to find out.
"""
from __future__ import annotations

import importlib.metadata
import sys

from millstream.engine.compat.pyflink_alias import PyFlinkAliasFinder

#: the class name of the .pth-installed finder (a top-level module of its own, not imported here)
FALLBACK_FINDER = "PyFlinkFallbackFinder"


def apache_flink_version() -> str | None:
    """The installed apache-flink's version, or None."""
    try:
        return importlib.metadata.version("apache-flink")
    except importlib.metadata.PackageNotFoundError:
        return None


def _is_ours(finder: object) -> bool:
    return isinstance(finder, PyFlinkAliasFinder) or getattr(finder, "__name__", None) == FALLBACK_FINDER


def pyflink_owner() -> str:
    """Whose package a plain ``import pyflink`` gets: "apache-flink" (a ``pyflink`` some finder other
    than Millstream's provides: the path, another editable install), "millstream" (the .pth fallback
    answers), or "nobody". Asked of the finders without importing anything, and regardless of an
    alias this process already installed."""
    finders = [f for f in sys.meta_path if not _is_ours(f)]
    for finder in finders:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is not None and find_spec("pyflink", None) is not None:
            return "apache-flink"
    return "millstream" if any(_is_ours(f) for f in sys.meta_path) else "nobody"


def coexistence_note() -> str | None:
    """One paragraph for the user when apache-flink is installed in this environment, else None."""
    version = apache_flink_version()
    if version is None:
        return None
    owner = pyflink_owner()
    plain = (
        "imports apache-flink's pyflink and so runs it on real PyFlink, not on Millstream"
        if owner == "apache-flink"
        else "runs it on Millstream (apache-flink's pyflink package is not importable here)"
    )
    return (
        f"note: apache-flink {version} is installed in this environment as well. `millstream run` runs "
        f"programs on Millstream either way; `python program.py` {plain}. The two share no files: "
        f"either can be uninstalled without breaking the other."
    )
