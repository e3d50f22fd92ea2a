"""How a benchmark sweep runs: one model for `peagle bench` and the promotion gates.

`peagle bench`'s flags and a gates file's `bench:` block set the same fields with the
same limits; each field's docstring is its documentation (and can be its flag's help).
The gates keep their own, quicker defaults (`GATE_DEFAULTS` in
`peagle_deploy.promote.gates`), given as data on top of this model, not as a second model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_LEVELS: tuple[int, ...] = (1, 4, 8, 32, 128)
"""Concurrency levels of a sweep when none are given (the published P-EAGLE table's)."""
MAX_LEVEL = 4096


class BenchSettings(BaseModel):
    """The sweep: which concurrency levels, how many requests each, with which prompts."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    concurrency: list[int] = Field(default_factory=lambda: list(DEFAULT_LEVELS), min_length=1)
    """Concurrency levels to measure (closed loop: that many requests in flight)."""
    num_prompts: int | None = Field(default=None, ge=1, le=100000)
    """Requests per level, after warm-up (default: max(32, 4 x concurrency), unless
    `duration_s` limits the level instead)."""
    duration_s: float | None = Field(default=None, gt=0)
    """Seconds per level; with `num_prompts` as well, whichever limit comes first."""
    warmup: int = Field(default=2, ge=0, le=1000)
    """Unmeasured warm-up requests before each level."""
    max_tokens: int = Field(default=256, ge=1, le=32768)
    """max_tokens of every request."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 makes acceptance comparable between runs."""
    dataset: str = Field(default="humaneval", min_length=1)
    """`humaneval` (the published P-EAGLE benchmark) or a path to a JSONL file of chats."""
    seed: int = 0
    """Prompt sampling seed, so two runs measure the same prompts."""

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        bad = [c for c in value if c < 1 or c > MAX_LEVEL]
        if bad:
            raise ValueError(f"concurrency levels must be between 1 and {MAX_LEVEL}, got {bad}")
        if len(set(value)) != len(value):
            raise ValueError(f"concurrency levels must be unique, got {value}")
        return sorted(value)
