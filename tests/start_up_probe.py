"""What a fresh `peagle` process loads: the start-up budget tests run `main(argv)` in a
new interpreter and ask which of some modules it imported."""

from __future__ import annotations

import json
import subprocess
import sys


def modules_loaded(
    argv: list[str], names: tuple[str, ...], *, top_level: bool = False
) -> list[str]:
    """Which of `names` a new process has imported after `peagle argv` exited 0 (with
    `top_level`, a name stands for its package and every module under it)."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from peagle_deploy.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        "assert code == 0, code\n"
        f"loaded = {{m.split('.')[0] for m in sys.modules}} if {top_level!r} else sys.modules\n"
        f"print(json.dumps(sorted(m for m in {names!r} if m in loaded)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return list(json.loads(out))
