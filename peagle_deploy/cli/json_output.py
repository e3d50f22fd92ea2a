"""Machine output: exactly one JSON document on stdout.

Apart from peagle_deploy.cli.output (rich consoles) so that `peagle plan --json` on the
fast path (peagle_deploy.cli.fast_plan) prints it without loading rich.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(data: Any) -> None:
    """One JSON document on stdout (indented; values JSON cannot hold as their str)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
