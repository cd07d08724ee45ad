"""Package layout that pyproject.toml cannot express on its own.

The repository's directories ``engine/``, ``backend/`` and ``migrations/`` are installed as
``millstream.engine``, ``millstream.backend`` and ``millstream.migrations`` (``millstream`` is a
namespace package), so no generic top-level name lands in site-packages. ``pyflink`` is served from
``engine/compat/pyflink``, and the dashboard's ``frontend/`` (templates and vendored static assets)
is shipped inside the backend package as ``millstream/backend/frontend`` so an installed wheel
carries it; ``backend/ui/templating.py`` looks there first and falls back to the source tree.
"""
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
PACKAGES = ("engine", "backend", "migrations")

# Every importable-looking directory under frontend/ is named, so that setuptools treats it as the
# data-only package it is rather than warning that it "would be ignored"; pyproject's package-data
# globs put the files of every level into the wheel.
FRONTEND = ROOT / "frontend"
frontend_packages = ["millstream.backend.frontend"] + [
    "millstream.backend.frontend." + ".".join(d.relative_to(FRONTEND).parts)
    for d in sorted(FRONTEND.rglob("*"))
    if d.is_dir() and all(part.isidentifier() for part in d.relative_to(FRONTEND).parts)
]

setup(
    packages=["millstream." + p for p in find_packages(include=[f"{p}*" for p in PACKAGES])]
    + ["pyflink", *frontend_packages],
    package_dir={
        **{f"millstream.{p}": p for p in PACKAGES},
        "pyflink": "engine/compat/pyflink",
        "millstream.backend.frontend": "frontend",
    },
)
