"""Uploaded programs: stored under server-generated names; zips are unpacked defensively.

A client's file name is only ever shown, never used as a path. Zip members
that escape the target directory, are absolute, are symlinks, or add up to
more than the size limit are refused before anything is written.
"""
from __future__ import annotations

import errno
import re
import stat
import uuid
import zipfile
import zlib
from pathlib import Path, PurePosixPath

ALLOWED_SUFFIXES = (".py", ".zip")
ZIP_ENTRY_CANDIDATES = ("__main__.py", "main.py")
# member names the file system refuses (too long, a file where a directory must be ...): the zip's fault
_CLIENT_PATH_ERRORS = {errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EINVAL, errno.EILSEQ}


class UploadRejected(ValueError):
    """The upload is not acceptable; the message says why (answered with 400 or 413)."""


def safe_display_name(name: str) -> str:
    base = PurePosixPath(name.replace("\\", "/")).name
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)[:120] or "program.py"


def new_program_id(original_name: str) -> str:
    """Flink's style: ``<uuid>_<name>``; the name part is sanitised and cosmetic."""
    return f"{uuid.uuid4().hex}_{safe_display_name(original_name)}"


def check_suffix(name: str) -> str:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in ALLOWED_SUFFIXES:
        raise UploadRejected(f"only .py programs or .zip archives can be uploaded, not '{suffix or name}'")
    return suffix


MAX_PROGRAM_ARGS = 10_000
MAX_PROGRAM_ARGS_CHARS = 100_000  # all arguments together; well under the OS's limit on one exec (E2BIG)


def check_program_args(args: list[str]) -> list[str]:
    """Arguments that can reach a program's command line: no NUL (exec refuses it), no lone surrogate
    (not encodable), and not so many or so long that exec fails; raises UploadRejected saying which."""
    if len(args) > MAX_PROGRAM_ARGS:
        raise UploadRejected(f"too many program arguments: {len(args)}, the limit is {MAX_PROGRAM_ARGS}")
    total = sum(len(a) for a in args)
    if total > MAX_PROGRAM_ARGS_CHARS:
        raise UploadRejected(
            f"the program arguments are too long: {total} characters, the limit is {MAX_PROGRAM_ARGS_CHARS}"
        )
    for i, a in enumerate(args):
        if "\x00" in a:
            raise UploadRejected(f"program argument {i} contains a NUL character")
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            raise UploadRejected(f"program argument {i} contains a lone surrogate (not valid Unicode text)") from None
    return args


def confined_path(root: Path, name: str) -> Path | None:
    """``name`` (relative to ``root``, or absolute) as a resolved path, or None when it is not inside
    ``root``: ``..`` and symbolic links are followed first, so neither can lead out of it."""
    base = root.resolve()
    try:
        dest = (base / name).resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL: nothing usable
        return None
    return dest if dest == base or base in dest.parents else None


def extract_zip(archive: Path, target: Path, max_total_bytes: int) -> None:
    target = target.resolve()
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as e:
        raise UploadRejected(f"the upload is not a valid zip archive: {e}") from None
    try:
        _extract(zf, target, max_total_bytes)
    except (zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError, ValueError, zlib.error) as e:
        if isinstance(e, UploadRejected):
            raise
        # a corrupt member, an unknown compression or an encrypted one: the archive cannot be used
        raise UploadRejected(f"the upload is not a valid zip archive: {e}") from None
    except OSError as e:
        if e.errno not in _CLIENT_PATH_ERRORS:
            raise
        raise UploadRejected(f"a zip member cannot be unpacked: {e.strerror} ({Path(e.filename or '').name:.80})") from None
    finally:
        zf.close()


def _extract(zf: zipfile.ZipFile, target: Path, max_total_bytes: int) -> None:
    total = 0
    for info in zf.infolist():
        name = info.filename
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UploadRejected(f"zip member '{name}' is a symbolic link")
        if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or "\\" in name:
            raise UploadRejected(f"zip member '{name}' has an absolute or foreign path")
        if confined_path(target, name) is None:
            raise UploadRejected(f"zip member '{name}' escapes the upload directory")
        total += info.file_size
        if total > max_total_bytes:
            raise UploadRejected(f"the zip unpacks to more than the limit of {max_total_bytes} bytes")
    target.mkdir(parents=True, exist_ok=True)
    for info in zf.infolist():
        dest = (target / info.filename).resolve()
        if info.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        with zf.open(info) as src, open(dest, "wb") as out:
            # Count real bytes too: a forged header must not smuggle a bomb past the limit.
            while chunk := src.read(1 << 16):
                written += len(chunk)
                if written > info.file_size:
                    raise UploadRejected(f"zip member '{info.filename}' is larger than its header says")
                out.write(chunk)


def zip_entry_point(root: Path, entry: str | None = None) -> Path:
    """The program to run inside an unpacked zip: ``entry`` if given, else __main__.py or main.py."""
    candidates = [entry] if entry else list(ZIP_ENTRY_CANDIDATES)
    for c in candidates:
        if "\x00" in c or len(c) > 1024 or not c.isprintable():
            raise UploadRejected(f"entry point {c!r:.100} is not a usable file name")
        try:
            p = (root / c).resolve()
            if root.resolve() in p.parents and p.is_file():
                return p
        except (OSError, UnicodeEncodeError):
            raise UploadRejected(f"entry point {c!r:.100} is not a usable file name") from None
    py_files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    raise UploadRejected(
        f"no entry point: expected {' or '.join(candidates)} in the zip (it holds {', '.join(py_files[:10]) or 'no .py files'})"
    )
