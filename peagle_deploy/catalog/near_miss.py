"""Which catalog key a model reference that is not one was most likely meant to be.

A reference that is neither a catalog key nor `custom` is read as a JumpStart model id,
which costs the sagemaker SDK and a read of JumpStart's bucket. A near miss of a known
name must be answered before that, offline, with the key(s) meant.

The rule, case-insensitive, against the catalog keys, `custom` and the JumpStart ids the
catalog records (a recorded id stands for its catalog key):
- the same name in other case (`GPT-OSS-20B`);
- else a truncation at a dash (`gemma-4` for gemma-4-31b-it, `qwen3-coder-30b`): every
  name it cuts;
- else, for catalog keys and `custom` only, a typo: the closest name(s) by difflib ratio,
  if at least TYPO_RATIO (`gpt-oss-2b`).
  JumpStart ids are not compared this way: real ids differ from the recorded ones by as
  little as a size (`...-gpt-oss-120b` and `...-gpt-oss-20b`), and must reach JumpStart.
A recorded JumpStart id itself is no near miss: it goes to JumpStart.
"""

from __future__ import annotations

from peagle_deploy.catalog.models import MODELS

CUSTOM = "custom"
TYPO_RATIO = 0.85
"""difflib similarity from which a reference is read as a mistyped catalog key."""


def recorded_jumpstart_ids() -> dict[str, str]:
    """JumpStart id -> catalog key, for the ids the catalog records."""
    return {entry.jumpstart_id.value: key for key, entry in MODELS.items()}


def _truncation_of(reference: str, name: str) -> bool:
    return name.startswith(reference + "-")


def _similarity(reference: str, name: str) -> float:
    import difflib  # only for a model reference that is no known name: not on a plan's path

    return difflib.SequenceMatcher(None, reference, name).ratio()


def near_misses(reference: str) -> list[str]:
    """The catalog keys (or `custom`) `reference` most likely meant; [] for none.

    The same name in other case wins alone; else every truncated name; else the closest
    typo(s) only (`gpt-oss-2b` is gpt-oss-20b, not also gpt-oss-120b).
    """
    wanted = reference.strip().lower()
    jumpstart = recorded_jumpstart_ids()
    if not wanted or reference in MODELS or reference == CUSTOM or reference in jumpstart:
        return []
    names = {name: name for name in [*MODELS, CUSTOM]}
    recorded = {js_id.lower(): key for js_id, key in jumpstart.items()}
    for known in (names, recorded):
        if wanted in known:
            return [known[wanted]]
    cut = {
        key
        for known in (names, recorded)
        for name, key in known.items()
        if _truncation_of(wanted, name)
    }
    if cut:
        return sorted(cut)
    scores = {name: _similarity(wanted, name) for name in names}
    best = max(scores.values())
    if best < TYPO_RATIO:
        return []
    return sorted(name for name, score in scores.items() if score == best)
