"""Test-only vLLM general plugin: how many drafter forward passes one proposal takes.

With PEAGLE_DRAFT_PROBE=1 in the engine's environment, every call of the speculative
proposer's `propose` (vLLM 0.30.0 `v1/spec_decode/llm_base_proposer.py`: one call per
engine step that drafts) prints one JSON line on stdout:

    {"event": "peagle.draft_probe", "drafter_passes": 1, "batch": 2, "tokens_per_draft": 3}

`drafter_passes` counts the drafter model's forward calls (a forward hook on the model
the proposer loaded); `tokens_per_draft` is the width of the draft it returned. Parallel
drafting (P-EAGLE) drafts K tokens in one pass; EAGLE-3 takes K sequential passes.
Without the variable the plugin does nothing. Never installed in the image.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

ENV = "PEAGLE_DRAFT_PROBE"
EVENT = "peagle.draft_probe"


def register() -> None:
    if os.environ.get(ENV) != "1":
        return
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    if getattr(SpecDecodeBaseProposer, "_peagle_probe", False):
        return
    load_model = SpecDecodeBaseProposer.load_model
    propose = SpecDecodeBaseProposer.propose

    def probed_load_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = load_model(self, *args, **kwargs)
        self._peagle_passes = 0

        def count(*_: Any) -> None:
            self._peagle_passes += 1

        self.model.register_forward_hook(count)
        return result

    def probed_propose(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._peagle_passes = 0
        drafts = propose(self, *args, **kwargs)
        line = {
            "event": EVENT,
            "drafter_passes": self._peagle_passes,
            "batch": int(drafts.shape[0]),
            "tokens_per_draft": int(drafts.shape[1]) if drafts.dim() > 1 else 1,
        }
        print(json.dumps(line), file=sys.stdout, flush=True)
        return drafts

    SpecDecodeBaseProposer.load_model = probed_load_model  # type: ignore[method-assign]
    SpecDecodeBaseProposer.propose = probed_propose  # type: ignore[method-assign]
    SpecDecodeBaseProposer._peagle_probe = True  # type: ignore[attr-defined]
