"""ProgramService: upload, list, delete and run uploaded programs (Flink's "jars")."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import BinaryIO

from millstream.backend.persistence.jar_store import JarInfo, JarRepository
from millstream.backend.services.program_dependencies import upload_dependencies
from millstream.backend.services.program_runner import CapturedJob, PlanLimiter, ProgramFailed, capture_job
from millstream.backend.services.uploads import (
    UploadRejected,
    check_program_args,
    check_suffix,
    extract_zip,
    new_program_id,
    safe_display_name,
    zip_entry_point,
)
from millstream.engine.graph.validation import InvalidJobGraph, validate_job_graph


class UploadTooLarge(UploadRejected):
    pass


class ProgramService:
    def __init__(
        self,
        repo: JarRepository,
        upload_dir: Path,
        max_bytes: int,
        plan_timeout_s: float,
        max_concurrent_plans: int = 4,
        default_parallelism: int = 1,
    ) -> None:
        self.repo = repo
        self.default_parallelism = default_parallelism  # MILLSTREAM_PARALLELISM_DEFAULT
        self.upload_dir = upload_dir
        self.max_bytes = max_bytes
        self.plan_timeout_s = plan_timeout_s
        self.plans = PlanLimiter(max_concurrent_plans)

    def upload(self, original_name: str, data: BinaryIO) -> JarInfo:
        suffix = check_suffix(original_name)
        program_id = new_program_id(original_name)
        home = self.upload_dir / program_id
        home.mkdir(parents=True)
        stored = home / ("archive.zip" if suffix == ".zip" else safe_display_name(original_name))
        size = 0
        try:
            with open(stored, "wb") as out:
                while chunk := data.read(1 << 16):
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise UploadTooLarge(f"the upload exceeds the limit of {self.max_bytes} bytes")
                    out.write(chunk)
            entry: list[str] | None = None
            if suffix == ".zip":
                extract_zip(stored, home / "program", self.max_bytes * 10)
                entry = [zip_entry_point(home / "program").relative_to((home / "program").resolve()).as_posix()]
            else:
                entry = [stored.name]
            # Inside the try: a refused row (FencedOut: this JobManager lost the leadership) leaves no files.
            return self.repo.add(program_id, original_name, str(stored), size, int(time.time() * 1000), entry)
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise

    def get(self, program_id: str) -> JarInfo | None:
        return self.repo.get(program_id)

    def list(self) -> list[JarInfo]:
        return self.repo.list()

    def delete(self, program_id: str) -> bool:
        info = self.repo.get(program_id)
        if info is None:
            return False
        self.repo.delete(program_id)
        shutil.rmtree(Path(info.stored_path).parent, ignore_errors=True)
        return True

    def entry_point(self, info: JarInfo, entry: str | None) -> Path:
        stored = Path(info.stored_path)
        if stored.suffix == ".zip":
            return zip_entry_point(stored.parent / "program", entry)
        return stored

    def upload_root(self, info: JarInfo) -> Path:
        """The directory an upload's files are in: where a .zip was unpacked, or the .py's own."""
        stored = Path(info.stored_path)
        return stored.parent / "program" if stored.suffix == ".zip" else stored.parent

    def capture(self, info: JarInfo, args: list[str], parallelism: int | None, entry: str | None = None) -> CapturedJob:
        """Run the program for its JobGraph; bad arguments (or dependency options naming nothing in the
        upload) are refused (UploadRejected) before a process starts, and the graph it builds is validated as a submitted one is (ProgramFailed if invalid)."""
        check_program_args(args)
        program = self.entry_point(info, entry)
        # -pyfs/-pyarch/-pyreq among the arguments name files of the upload, shipped with the job
        dependencies, args = upload_dependencies(self.upload_root(info), args)
        with self.plans:  # PlanBusy when full
            captured = capture_job(
                program, args, parallelism, self.plan_timeout_s, self.default_parallelism, dependencies
            )
        try:
            validate_job_graph(captured.job_graph)
        except InvalidJobGraph as e:
            raise ProgramFailed(str(e), "") from None
        return captured
