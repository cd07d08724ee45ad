"""Package layout that pyproject.toml cannot express on its own.

``pyflink`` is served from ``engine/compat/pyflink``, and the dashboard's
``frontend/`` (templates and vendored static assets) is shipped inside the
``backend`` package as ``backend/frontend`` so an installed wheel carries it;
``backend.ui.templating`` looks there first and falls back to the source tree.
"""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["engine*", "backend*", "migrations*"]) + ["pyflink", "backend.frontend"],
    package_dir={"pyflink": "engine/compat/pyflink", "backend.frontend": "frontend"},
)
