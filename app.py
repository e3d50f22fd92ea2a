#!/usr/bin/env python3
"""CDK app: one PeagleStack per stage of cdk.json's `peagle:stages` context.

Only wiring: what each stage deploys is its spec (stages/<stage>.yaml plus context
overrides), validated and rendered by peagle_deploy exactly as `peagle deploy` would.
`-c peagle:nag=true` runs the cdk-nag AwsSolutions checks during synth.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from infra.stack import PeagleStack
from infra.stages import NAG_CONTEXT_KEY, STAGES_CONTEXT_KEY, stage_configs
from peagle_deploy.errors import PeagleError


def main(context: Mapping[str, Any] | None = None) -> int:
    """Synthesize every stage; a bad spec is one clear line and exit code 2.

    The CDK CLI passes cdk.json's context in the environment; `context` adds to it
    (for running the app in-process).
    """
    # Construct stack traces under jsii are frames of its JavaScript runtime, never of this
    # Python code: `cdk synth` printed a useless `.../lib/program.js:1:5591` per warning.
    app = cdk.App(context=dict(context) if context is not None else None, stack_traces=False)
    try:
        stages = stage_configs(
            app.node.try_get_context(STAGES_CONTEXT_KEY), Path(__file__).resolve().parent
        )
        for stage in stages:
            PeagleStack(app, stage.stack_id, stage=stage)
    except PeagleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    nag = str(app.node.try_get_context(NAG_CONTEXT_KEY)).lower() == "true"
    if nag:
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    if nag:
        from infra.nag import nag_summary

        print(nag_summary(app, len(stages)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
