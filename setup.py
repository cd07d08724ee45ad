"""Package layout that pyproject.toml cannot express on its own.

``pyflink`` is served from ``engine/compat/pyflink``, and the dashboard's
``frontend/`` (templates and vendored static assets) is shipped inside the
``backend`` package as ``backend/frontend`` so an installed wheel carries it;
``backend.ui.templating`` looks there first and falls back to the source tree.
"""
from pathlib import Path

from setuptools import find_packages, setup

# Every importable-looking directory under frontend/ is named, so that setuptools treats it as the
# data-only package it is rather than warning that it "would be ignored"; pyproject's package-data
# globs put the files of every level into the wheel.
FRONTEND = Path(__file__).resolve().parent / "frontend"
frontend_packages = ["backend.frontend"] + [
    "backend.frontend." + ".".join(d.relative_to(FRONTEND).parts)
    for d in sorted(FRONTEND.rglob("*"))
    if d.is_dir() and all(part.isidentifier() for part in d.relative_to(FRONTEND).parts)
]

setup(
    packages=find_packages(include=["engine*", "backend*", "migrations*"]) + ["pyflink", *frontend_packages],
    package_dir={"pyflink": "engine/compat/pyflink", "backend.frontend": "frontend"},
)
