"""Package discovery that pyproject.toml cannot express: ``pyflink`` is served from ``engine/compat/pyflink``."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["engine*", "backend*", "migrations*"]) + ["pyflink"],
    package_dir={"pyflink": "engine/compat/pyflink"},
)
