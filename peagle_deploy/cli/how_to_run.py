"""How to run `peagle` from a shell, said where a newcomer first needs it.

`make demo` installs into .venv and runs `.venv/bin/peagle demo`; the user's shell does
not have .venv/bin on its PATH, so a bare `peagle` after the demo is "command not found".
The hint is derived from the running interpreter (its scripts directory), never a fixed
path, and is silent about PATH when `peagle` there is this very installation.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

NEXT_COMMAND = "plan gpt-oss-20b"
"""What the hint suggests running first (offline, no account)."""


def scripts_dir() -> Path:
    """Where this interpreter's console scripts (`peagle`) are installed."""
    return Path(sysconfig.get_path("scripts"))


def _shown(path: Path) -> str:
    """`path` relative to the working directory when inside it (.venv/bin), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _same_file(found: str | None, ours: Path) -> bool:
    if found is None:
        return False
    try:
        return os.path.samefile(found, ours)
    except OSError:
        return False


def run_hint(path_env: str | None = None) -> list[str]:
    """The lines that say how to run `peagle` in the user's own shell."""
    scripts = scripts_dir()
    ours = scripts / ("peagle.exe" if sys.platform == "win32" else "peagle")
    found = shutil.which(
        "peagle", path=path_env if path_env is not None else os.environ.get("PATH")
    )
    if _same_file(found, ours):
        return [f"next: peagle {NEXT_COMMAND}   (peagle --help lists every command)"]
    where = _shown(scripts)
    lines = [f"next: `peagle` is installed in {where}, which is not on your PATH. Run it as"]
    if found is not None:
        lines[0] = (
            f"next: `peagle` on your PATH is another installation ({found}); this one is in "
            f"{where}. Run it as"
        )
    lines.append(f"  {os.path.join(where, 'peagle')} {NEXT_COMMAND}")
    activate = scripts / "activate"
    if sys.prefix != sys.base_prefix and activate.is_file():
        lines.append(f"or first: source {os.path.join(where, 'activate')}   (then: peagle ...)")
    return lines
