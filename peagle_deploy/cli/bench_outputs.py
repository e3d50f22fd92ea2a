"""Where `peagle bench` writes its results (--json, --report): checked first, written last.

A sweep can take an hour; a results path that cannot be written must be refused before
the first request, with one line naming the flag, not after the sweep with a traceback.
The check creates nothing that stays behind: an existing file is opened for appending
(no truncation), a missing one is stood in for by a probe file created and removed in
the nearest directory that exists.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from peagle_deploy.cli import output
from peagle_deploy.errors import InputError, PeagleError

if TYPE_CHECKING:
    from peagle_deploy.bench.compare import Comparison


def check_outputs(json_path: str | None, report: str | None) -> None:
    """Refuse an output location that cannot be written, naming its flag."""
    if json_path and json_path != "-":
        _check_file(Path(json_path), "--json", "a file path, or - for stdout")
    if report is not None:
        from peagle_deploy.bench.compare import REPORT_FILES
        from peagle_deploy.extras import require

        require("matplotlib", "--report (its plot)")

        directory = Path(report)
        try:
            exists = directory.exists()
            if exists and not directory.is_dir():
                raise InputError("--report", f"{directory} is not a directory", "a directory")
        except OSError as exc:
            raise InputError("--report", f"cannot use {directory}: {exc.strerror or exc}") from None
        if not exists:
            _check_creatable(directory, "--report")
            return
        _probe(directory, "--report")
        for name in REPORT_FILES.values():
            _check_file(directory / name, "--report", "a directory whose report files are files")


def _check_file(path: Path, flag: str, allowed: str) -> None:
    try:
        if path.is_dir():
            raise InputError(flag, f"{path} is a directory", allowed)
        if path.exists():
            with path.open("a"):  # appending truncates nothing
                return
    except OSError as exc:
        raise InputError(flag, f"cannot write {path}: {exc.strerror or exc}") from None
    _check_creatable(path.parent, flag)


def _check_creatable(directory: Path, flag: str) -> None:
    """`directory` exists as a writable directory, or can be created."""
    try:
        existing = directory
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            problem = f"cannot create {directory}: {existing} is not a directory"
            raise InputError(flag, problem)
    except OSError as exc:
        raise InputError(flag, f"cannot create {directory}: {exc.strerror or exc}") from None
    _probe(existing, flag, creating=directory)


def _probe(directory: Path, flag: str, creating: Path | None = None) -> None:
    """Create and remove a file in `directory`: the one sure test that it is writable."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".peagle-write-check-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        what = f"cannot create {creating}" if creating is not None else "cannot write"
        raise InputError(flag, f"{what} in {directory}: {exc.strerror or exc}") from None


def emit(doc: dict[str, Any], json_path: str) -> None:
    """The JSON document on stdout (`-`) or in a file."""
    if json_path == "-":
        output.emit_json(doc)
        return
    path = Path(json_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise PeagleError(f"--json: cannot write {path}: {exc.strerror or exc}") from None


def write_outputs(
    doc: dict[str, Any], comparison: Comparison, json_path: str | None, report: str | None
) -> None:
    if json_path:
        emit(doc, json_path)
    if report is not None:
        try:
            files = comparison.write_report(Path(report))
        except OSError as exc:
            raise PeagleError(
                f"--report: cannot write the report in {report}: {exc.strerror or exc}"
            ) from None
        if json_path != "-":
            where = ", ".join(str(p) for p in files.values())
            output.err_console.print(f"report written: {where}", highlight=False, markup=False)
