"""Package layout that pyproject.toml cannot express on its own.

The repository's directories ``engine/``, ``backend/`` and ``migrations/`` are installed as
``millstream.engine``, ``millstream.backend`` and ``millstream.migrations`` (``millstream`` is a
namespace package), so no generic top-level name lands in site-packages. The dashboard's
``frontend/`` (templates and vendored static assets) is shipped inside the backend package as
``millstream/backend/frontend`` so an installed wheel carries it; ``backend/ui/templating.py``
looks there first and falls back to the source tree.

``pyflink`` is not a directory of this distribution: apache-flink owns ``site-packages/pyflink``,
and two distributions writing the same files overwrite (and on uninstall delete) each other's. A
``millstream-pyflink.pth`` file and the tiny module it imports (``_millstream_pyflink``, from
``engine/compat/site_hook``) serve the name at import time instead, only when no other ``pyflink``
is importable. Both have to sit at the root of site-packages, where no package data can go, so
``build_py`` below copies them there, for a wheel and for ``pip install -e .`` alike (an editable
install holds copies of these two: editing them needs a reinstall, as editing setup.py does).
"""
import os
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGES = ("engine", "backend", "migrations")
SITE_HOOK = "engine/compat/site_hook"
SITE_FILES = ("millstream-pyflink.pth", "_millstream_pyflink.py")

# Every importable-looking directory under frontend/ is named, so that setuptools treats it as the
# data-only package it is rather than warning that it "would be ignored"; pyproject's package-data
# globs put the files of every level into the wheel.
FRONTEND = ROOT / "frontend"
frontend_packages = ["millstream.backend.frontend"] + [
    "millstream.backend.frontend." + ".".join(d.relative_to(FRONTEND).parts)
    for d in sorted(FRONTEND.rglob("*"))
    if d.is_dir() and all(part.isidentifier() for part in d.relative_to(FRONTEND).parts)
]


class BuildPyWithSiteFiles(build_py):
    """build_py that also puts the .pth file and its module at the root of what gets installed."""

    def run(self) -> None:
        super().run()
        target = self.build_lib
        if getattr(self, "editable_mode", False):
            # An editable wheel is made of the finder setuptools writes and the files installed
            # into its unpacked tree, not of build_lib: editable_wheel points install_lib there.
            target = self.get_finalized_command("install").install_lib
        self.mkpath(target)
        for name in SITE_FILES:
            self.copy_file(os.path.join(SITE_HOOK, name), os.path.join(target, name))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), *(os.path.join(self.build_lib, n) for n in SITE_FILES)]


setup(
    packages=["millstream." + p for p in find_packages(include=[f"{p}*" for p in PACKAGES])] + frontend_packages,
    package_dir={
        **{f"millstream.{p}": p for p in PACKAGES},
        "millstream.backend.frontend": "frontend",
    },
    cmdclass={"build_py": BuildPyWithSiteFiles},
)
