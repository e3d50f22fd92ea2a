"""Which of detailed observability's series each variant lacks, and what that means.

An experiment on an image other than the project's reads vLLM's series through
SageMaker's detailed observability (`experiment.detailed`). Two facts it rests on are
stated in no page read: the names CloudWatch stores the series under, and whether a
shadow variant's series carry `aws.sagemaker.variant.name`. If either differs, the
candidate is never seen and the experiment never decides, silently. So `status` says,
per variant, which series it looked for and did not find, telling apart:

- no traffic yet: SageMaker counted no invocation of the variant (`AWS/SageMaker`), so
  no series is expected;
- waiting for a scrape: traffic, but less than `SCRAPE_GRACE_S` ago;
- traffic but no series: traffic longer ago than that, and still no series for it; with
  what came back instead (series without the variant label, or under other variants).

Pure: a `SeriesSeen` and the invocation counts in, one `VariantSeries` per variant out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from peagle_deploy.experiment.detailed import VARIANT_LABEL, WATCHED, SeriesSeen
from peagle_deploy.experiment.observations import VariantSample

LONGEST_PUBLISH_S = 300
"""The longest `MetricPublishFrequencyInSeconds` botocore allows (10, 30, 60, 120, 180,
240 or 300; docs/platform-facts.md): a series is scraped within one period of the
first request."""
DELIVERY_S = 120
"""An allowance, not a platform fact, for the scrape to reach CloudWatch and the
invocation count to be published (no page read gives either delay)."""
SCRAPE_GRACE_S = LONGEST_PUBLISH_S + DELIVERY_S
"""Seconds after a variant's first counted invocation before its missing series are
reported as missing: long enough for any publish period, so no false alarm."""

State = Literal["found", "no traffic yet", "waiting for a scrape", "traffic but no series"]


def _shown(names: tuple[str, ...]) -> str:
    """`vllm:x_total (or vllm:x)`: the first name asked, and the others tried."""
    return names[0] + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")


LOOKED_FOR: tuple[str, ...] = tuple(_shown(names) for names in WATCHED)
"""The series every serving variant must have, as `status` names them."""


@dataclass(frozen=True)
class VariantSeries:
    """What detailed observability answered for one variant."""

    variant: str
    state: State
    missing: tuple[str, ...]
    """The series looked for and not found with this variant's label."""
    first_invocation_ms: int | None
    """End of the first minute SageMaker counted an invocation of the variant in."""
    instead: str | None = None
    """What came back instead, when something did (unlabelled series, other variants)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "state": self.state,
            "looked_for": list(LOOKED_FOR),
            "missing": list(self.missing),
            "first_invocation_ms": self.first_invocation_ms,
            "instead": self.instead,
        }

    def text(self) -> str | None:
        """One line for `status`, None when every series came back."""
        if self.state == "found":
            return None
        missing = ", ".join(self.missing)
        if self.state == "no traffic yet":
            return f"{self.variant}: no traffic yet (SageMaker counted no invocation)"
        if self.state == "waiting for a scrape":
            return (
                f"{self.variant}: traffic, no series yet (a scrape may not have been "
                f"published: up to {SCRAPE_GRACE_S // 60} minutes); missing {missing}"
            )
        return (
            f"{self.variant}: traffic for more than {SCRAPE_GRACE_S // 60} minutes but no "
            f"detailed-observability series for it: looked for {missing}"
            + (f"; {self.instead}" if self.instead else "")
            + "; this experiment cannot see this variant and will not decide"
        )


def first_invocations(counts: Iterable[VariantSample]) -> dict[str, int]:
    """variant -> the stamp (minute end) of its first minute with an invocation."""
    first: dict[str, int] = {}
    for sample in counts:
        if sample.invocations > 0:
            first[sample.variant] = min(
                first.get(sample.variant, sample.timestamp_ms), sample.timestamp_ms
            )
    return first


def _instead(seen: SeriesSeen, variant: str, expected: Sequence[str]) -> str | None:
    """What came back in place of the variant's series, in words."""
    parts = []
    unlabelled = [n for n in seen.unlabelled if any(n == names[0] for names in WATCHED)]
    if unlabelled:
        parts.append(
            f"{len(unlabelled)} of these came back without the {VARIANT_LABEL} label "
            "(a shadow variant's may not carry it)"
        )
    others = sorted(
        {v for names in WATCHED for v in seen.variants.get(names[0], frozenset())} - set(expected)
    )
    if others:
        parts.append(f"series came back for variant {', '.join(others)}, not {variant}")
    return "; ".join(parts) or None


def series_check(
    seen: SeriesSeen,
    counts: Iterable[VariantSample],
    variants: Sequence[str],
    *,
    now_ms: int,
    grace_s: float = SCRAPE_GRACE_S,
) -> list[VariantSeries]:
    """Per variant: the watched series that did not come back with its label, and whether
    that means anything yet (`State`)."""
    first = first_invocations(counts)
    out = []
    for variant in variants:
        missing = tuple(
            _shown(names)
            for names in WATCHED
            if variant not in seen.variants.get(names[0], frozenset())
        )
        since = first.get(variant)
        state: State
        if not missing:
            state = "found"
        elif since is None:
            state = "no traffic yet"
        elif now_ms - since < grace_s * 1000:
            state = "waiting for a scrape"
        else:
            state = "traffic but no series"
        instead = _instead(seen, variant, variants) if state == "traffic but no series" else None
        out.append(VariantSeries(variant, state, missing, since, instead))
    return out
