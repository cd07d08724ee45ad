"""Apache Flink's own PyFlink (the ``apache-flink`` distribution) installed next to Millstream.

Both distributions own the top-level ``pyflink`` package, so in one environment the one installed
last owns ``site-packages/pyflink``. ``millstream run`` is not affected (it puts Millstream's alias
first on the import path), but ``python program.py`` imports whichever owns the directory, and
uninstalling either breaks the other. The CLI says so instead of leaving users to find out.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path


def apache_flink_version() -> str | None:
    """The installed apache-flink's version, or None."""
    try:
        return importlib.metadata.version("apache-flink")
    except importlib.metadata.PackageNotFoundError:
        return None


def pyflink_owner() -> str:
    """Whose package a plain ``import pyflink`` finds first on the path: "millstream" or "apache-flink"
    (found without importing it, since importing Millstream's shim installs the alias)."""
    spec = importlib.util.find_spec("pyflink")
    if spec is None or spec.origin is None:
        return "nobody"
    text = Path(spec.origin).read_text(errors="replace") if spec.origin.endswith(".py") else ""
    return "millstream" if "__millstream_shim__" in text else "apache-flink"


def coexistence_note() -> str | None:
    """One paragraph for the user when apache-flink is installed in this environment, else None."""
    version = apache_flink_version()
    if version is None:
        return None
    owner = pyflink_owner()
    plain = (
        "runs it on real PyFlink, not on Millstream" if owner == "apache-flink" else "runs it on Millstream"
    )
    return (
        f"note: apache-flink {version} is installed in this environment as well. `millstream run` runs "
        f"programs on Millstream either way; `python program.py` imports the pyflink package found first "
        f"({owner}'s) and so {plain}. Both distributions own site-packages/pyflink: keep them in separate "
        f"virtualenvs."
    )
