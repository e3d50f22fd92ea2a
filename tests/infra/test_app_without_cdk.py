"""`npx cdk synth` without the `cdk` extra: one line naming the extra, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _synth_without(module: str, *context: str) -> subprocess.CompletedProcess[str]:
    # `None` in sys.modules: the module can be neither found nor imported, as when the
    # extra is not installed. cdk.json's command runs app.py as a script from the checkout.
    code = (
        "import runpy, sys\n"
        f"sys.modules[{module!r}] = None\n"
        "sys.argv = ['app.py']\n"
        "runpy.run_path('app.py', run_name='__main__')\n"
    )
    env = {**os.environ, **dict(c.split("=", 1) for c in context)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, check=False
    )


def _one_line(run: subprocess.CompletedProcess[str], start: str) -> None:
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith(start), run.stderr
    assert "install -e '.[cdk]'" in run.stderr  # a clone's form (issue 35)


@pytest.mark.parametrize("module", ["aws_cdk", "constructs"])
def test_the_app_names_the_missing_extra(module: str) -> None:
    _one_line(_synth_without(module), f"error: the CDK app (`npx cdk synth`) needs {module} ")


def test_the_nag_checks_name_the_missing_extra(tmp_path: Path) -> None:
    # The CDK CLI hands the app its context in CDK_CONTEXT_JSON.
    context = json.dumps({"peagle:nag": "true", "@aws-cdk/core:outdir": str(tmp_path)})
    run = _synth_without("cdk_nag", f"CDK_CONTEXT_JSON={context}")
    _one_line(run, "error: -c peagle:nag=true needs cdk_nag ")
