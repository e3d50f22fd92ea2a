"""Several labelled configurations side by side, in the shape of the published table.

Label convention (or an explicit kind): a label starting with `peagle` / `p-eagle` is
a P-EAGLE configuration, `eagle3` / `eagle-3` an EAGLE-3 one, `baseline` / `base` /
`none` / `nospec` runs without speculation; anything else is `other` (shown, but in no
ratio). A trailing `-k<N>` (`peagle-k7`) gives K. Per concurrency the table shows each
configuration's output tokens/s, best P-EAGLE / best EAGLE-3 ("P/E3", best over K at
that concurrency, as the published table does) and best P-EAGLE / baseline ("P/base").
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peagle_deploy.bench.result_shape import SHAPE
from peagle_deploy.bench.runner import SweepResult
from peagle_deploy.documents import RESULTS, load_document
from peagle_deploy.errors import InputError
from peagle_deploy.extras import require

PEAGLE = "p-eagle"
EAGLE3 = "eagle3"
BASELINE = "baseline"
OTHER = "other"
KINDS = (PEAGLE, EAGLE3, BASELINE, OTHER)

_PREFIXES = (
    (PEAGLE, ("peagle", "p-eagle", "p_eagle")),
    (EAGLE3, ("eagle3", "eagle-3", "eagle_3")),
    (BASELINE, ("baseline", "base", "none", "nospec", "no-spec")),
)
_K_RE = re.compile(r"(?:^|[-_.])k(\d+)$", re.IGNORECASE)

CSV_COLUMNS = (
    "label",
    "kind",
    "k",
    "concurrency",
    "completed",
    "failed",
    "duration_s",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    *(
        f"{stat}_{m}_ms"
        for m in ("ttft", "tpot", "itl", "e2el")
        for stat in ("mean", "median", "p90", "p99")
    ),
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "cost_per_million_output_tokens",
)

REPORT_FILES = {
    "json": "results.json",
    "csv": "results.csv",
    "markdown": "report.md",
    "plot": "throughput.png",
}
"""What `write_report` writes into its directory."""


def classify(label: str, kind: str | None = None) -> str:
    """The configuration kind of a label (explicit `kind` wins)."""
    if kind:
        norm = kind.strip().lower().replace("_", "-")
        aliases = {"peagle": PEAGLE, "eagle-3": EAGLE3, "none": BASELINE, "base": BASELINE}
        norm = aliases.get(norm, norm)
        if norm not in KINDS:
            raise InputError("--kind", f"{kind!r} is not a configuration kind", KINDS)
        return norm
    low = label.strip().lower()
    for name, prefixes in _PREFIXES:
        if low.startswith(prefixes):
            return name
    return OTHER


def k_from_label(label: str) -> int | None:
    """K from a `-k<N>` suffix (`peagle-k11` -> 11), else None."""
    m = _K_RE.search(label.strip())
    return int(m.group(1)) if m else None


def label_run(run: SweepResult, kind: str | None = None, k: int | None = None) -> SweepResult:
    """Fill in kind and K from the label where they were not given."""
    run.kind = classify(run.label, kind or run.kind)
    if k is not None:
        run.k = k
    elif run.k is None:
        run.k = k_from_label(run.label)
    return run


@dataclass
class Comparison:
    """Sweeps of several configurations over the same concurrency levels.

    Labels must be unique; `flag` is the option a duplicate is blamed on.
    """

    runs: list[SweepResult]
    flag: str = field(default="--target", repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = [r.label for r in self.runs]
        dupes = sorted({lb for lb in labels if labels.count(lb) > 1})
        if dupes:
            raise InputError(self.flag, f"duplicate labels {', '.join(dupes)}", "unique labels")
        for run in self.runs:
            label_run(run)

    @property
    def ordered_runs(self) -> list[SweepResult]:
        """P-EAGLE by K, EAGLE-3 by K, baseline, then others (the published order)."""
        rank = {kind: i for i, kind in enumerate(KINDS)}
        return sorted(
            self.runs,
            key=lambda r: (rank[r.kind or OTHER], r.k if r.k is not None else 1 << 30, r.label),
        )

    @property
    def concurrencies(self) -> list[int]:
        return sorted({lv.concurrency for r in self.runs for lv in r.levels})

    def throughput(self, run: SweepResult, concurrency: int) -> float | None:
        for lv in run.levels:
            if lv.concurrency == concurrency:
                return lv.output_throughput
        return None

    def best(self, kind: str, concurrency: int) -> tuple[str, float] | None:
        """(label, output tokens/s) of the fastest configuration of a kind."""
        best: tuple[str, float] | None = None
        for run in self.runs:
            if run.kind != kind:
                continue
            value = self.throughput(run, concurrency)
            if value is not None and (best is None or value > best[1]):
                best = (run.label, value)
        return best

    def table(self) -> list[dict[str, Any]]:
        """One row per concurrency: throughput per label, best-of-kind and ratios."""
        rows: list[dict[str, Any]] = []
        for c in self.concurrencies:
            p = self.best(PEAGLE, c)
            e = self.best(EAGLE3, c)
            b = self.best(BASELINE, c)
            rows.append(
                {
                    "concurrency": c,
                    "output_throughput": {
                        r.label: self.throughput(r, c) for r in self.ordered_runs
                    },
                    "best_peagle": p[0] if p else None,
                    "best_eagle3": e[0] if e else None,
                    "baseline": b[0] if b else None,
                    "peagle_over_eagle3": _ratio(p, e),
                    "peagle_over_baseline": _ratio(p, b),
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": 1,
            "runs": [r.to_dict() for r in self.ordered_runs],
            "table": self.table(),
        }

    @classmethod
    def from_dict(cls, doc: Any) -> Comparison:
        """A comparison JSON, one sweep result, or a list of sweep results."""
        return cls(_runs_of(doc))

    @classmethod
    def load(cls, items: Sequence[str | Path]) -> Comparison:
        """Results files, each `PATH` or `LABEL=PATH` (which renames the one run the
        file holds: two runs saved under the same label can then be compared)."""
        runs: list[SweepResult] = []
        source: dict[str, str] = {}  # label -> the --results item it came from
        for item in items:
            label, path = _results_item(item)
            loaded = _load_results_file(path)
            if label is not None:
                if len(loaded) != 1:
                    names = ", ".join(r.label for r in loaded)
                    raise InputError(
                        "--results",
                        f"{path} holds {len(loaded)} runs ({names}); LABEL=PATH renames "
                        "a file with one run",
                    )
                loaded[0].label = label
            for run in loaded:
                if run.label in source:
                    raise InputError(
                        "--results",
                        f"{source[run.label]} and {path} both have a run labelled "
                        f"{run.label!r}; give one a new label: --results NEW-LABEL={path}",
                        "unique labels",
                    )
                source[run.label] = str(path)
            runs.extend(loaded)
        return cls(runs, flag="--results")

    # --- renderings ---------------------------------------------------------------
    def to_csv(self) -> str:
        """One row per configuration and level with every metric."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for run in self.ordered_runs:
            for lv in run.levels:
                row = {"label": run.label, "kind": run.kind, "k": run.k, **lv.to_dict()}
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
        return buf.getvalue()

    def to_markdown(self, title: str = "P-EAGLE benchmark") -> str:
        runs = self.ordered_runs
        lines = [f"# {title}", ""]
        first = runs[0] if runs else None
        if first is not None:
            cfg = first.config
            lines += [
                f"Dataset `{first.dataset}`, max_tokens {cfg.get('max_tokens')}, "
                f"temperature {cfg.get('temperature')}, seed {cfg.get('seed')}; closed loop "
                "at constant concurrency. Output tokens/s = total output tokens (server "
                "usage) / benchmark duration.",
                "",
            ]
        header = ["conc", *(r.label for r in runs), "P/E3", "P/base"]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in self.table():
            cells = [str(row["concurrency"])]
            cells += [_num(row["output_throughput"][r.label]) for r in runs]
            cells += [
                _ratio_text(row["peagle_over_eagle3"]),
                _ratio_text(row["peagle_over_baseline"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "P/E3 = best P-EAGLE / best EAGLE-3 at that concurrency; P/base = best P-EAGLE / "
            "baseline.",
            "",
            "## Latency, failures, acceptance",
            "",
            "| config | conc | median TTFT ms | p99 TTFT ms | median TPOT ms | median ITL ms "
            "| completed | failed | acceptance % | acceptance length | cost / 1M tokens |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in runs:
            for lv in run.levels:
                d = lv.to_dict()
                lines.append(
                    "| "
                    + " | ".join(
                        [
                            run.label,
                            str(lv.concurrency),
                            _num(d.get("median_ttft_ms"), 1),
                            _num(d.get("p99_ttft_ms"), 1),
                            _num(d.get("median_tpot_ms"), 2),
                            _num(d.get("median_itl_ms"), 2),
                            str(d.get("completed")),
                            str(d.get("failed")),
                            _num(d.get("spec_decode_acceptance_rate"), 1),
                            _num(d.get("spec_decode_acceptance_length"), 2),
                            _num(d.get("cost_per_million_output_tokens"), 4),
                        ]
                    )
                    + " |"
                )
        errors = [
            f"- {run.label} c={lv.concurrency}: {reason} (x{count})"
            for run in runs
            for lv in run.levels
            for reason, count in (lv.metrics.get("errors") or {}).items()
        ]
        if errors:
            lines += ["", "## Errors", "", *errors]
        return "\n".join(lines) + "\n"

    def plot(self, path: Path, title: str = "P-EAGLE benchmark") -> Path:
        """PNG: output tokens/s and median TTFT against concurrency, one line per config."""
        require("matplotlib", "the benchmark plot")
        import matplotlib.pyplot as plt

        fig = self.figure(title)
        path = Path(path)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    def figure(self, title: str = "P-EAGLE benchmark") -> Any:
        """The plot's matplotlib Figure (close it with matplotlib.pyplot.close).

        Both value axes start at 0: an autoscaled 50.9-51.4 ms TTFT axis made noise look
        like a cliff. The title says what was measured (dataset, max_tokens, date).
        """
        require("matplotlib", "the benchmark plot")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax_tp, ax_ttft) = plt.subplots(1, 2, figsize=(12, 4.5))
        for run in self.ordered_runs:
            xs = [lv.concurrency for lv in run.levels]
            ax_tp.plot(xs, [lv.output_throughput for lv in run.levels], marker="o", label=run.label)
            ttft = [lv.metrics.get("median_ttft_ms") for lv in run.levels]
            pts = [(x, y) for x, y in zip(xs, ttft, strict=True) if y is not None]
            if pts:
                ax_ttft.plot(*zip(*pts, strict=True), marker="o", label=run.label)
        from matplotlib.ticker import FixedLocator, ScalarFormatter

        levels = self.concurrencies
        for ax, ylabel in ((ax_tp, "output tokens/s"), (ax_ttft, "median TTFT (ms)")):
            ax.set_xscale("log", base=2)
            if levels:
                ax.xaxis.set_major_locator(FixedLocator(levels))
                ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.set_xlabel("concurrency")
            ax.set_ylabel(ylabel)
            top = ax.dataLim.ymax if ax.get_lines() else 0.0
            ax.set_ylim(0, top * 1.1 if top > 0 else 1.0)  # from 0, with room above the top
            ax.grid(True, alpha=0.3)
            if ax.get_lines():
                ax.legend(fontsize="small")
            else:
                ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        ax_tp.set_title("Throughput")
        ax_ttft.set_title("Time to first token")
        fig.suptitle(f"{title}: {self.measured()}")
        fig.tight_layout()
        return fig

    def measured(self) -> str:
        """`dataset humaneval, max_tokens 256, 2026-11-23` (values that differ joined by /)."""

        def values(get: Any) -> str:
            seen: list[str] = []
            for run in self.ordered_runs:
                value = str(get(run))
                if value and value not in seen:
                    seen.append(value)
            return "/".join(seen) or "?"

        dataset = values(lambda r: r.dataset)
        max_tokens = values(lambda r: r.config.get("max_tokens", ""))
        date = values(lambda r: r.started_at[:10])
        return f"dataset {dataset}, max_tokens {max_tokens}, {date}"

    def write_report(self, directory: Path, title: str = "P-EAGLE benchmark") -> dict[str, Path]:
        """results.json, results.csv, report.md and throughput.png in `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = {kind: directory / name for kind, name in REPORT_FILES.items()}
        files["json"].write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        files["csv"].write_text(self.to_csv(), encoding="utf-8")
        files["markdown"].write_text(self.to_markdown(title), encoding="utf-8")
        self.plot(files["plot"], title)
        return files


def _results_item(item: str | Path) -> tuple[str | None, Path]:
    """`PATH` or `LABEL=PATH` (an existing file whose name contains `=` is a PATH)."""
    if isinstance(item, Path) or _exists(item):
        return None, Path(item)
    label, sep, path = item.partition("=")
    if not sep:
        return None, Path(item)
    if not label.strip() or not path.strip():
        raise InputError("--results", f"{item!r} is not LABEL=PATH", "PATH, LABEL=PATH")
    return label.strip(), Path(path.strip())


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def _load_results_file(path: Path) -> list[SweepResult]:
    """The runs of one results file, read through `peagle_deploy.documents` (size,
    encoding, depth, duplicate keys and NaN refused) and checked for shape."""
    doc = load_document(path, "--results", RESULTS, fmt="json")
    try:
        return _runs_of(doc, str(path))
    except InputError as exc:
        raise InputError("--results", exc.problem, exc.allowed) from None


def _runs_of(doc: Any, where: str = "results") -> list[SweepResult]:
    """The sweep results in a comparison JSON, one sweep result, or a list of them."""
    if isinstance(doc, dict) and "runs" in doc:
        items = doc["runs"]
        where += ".runs"
    elif isinstance(doc, dict) and "levels" in doc:
        items = [doc]
    elif isinstance(doc, list):
        items = doc
    else:
        raise InputError("results", f"{where}: not a bench result", SHAPE)
    if not isinstance(items, list) or not items:
        raise InputError("results", f"{where}: no runs", SHAPE)
    runs = []
    for i, item in enumerate(items):
        at = where if len(items) == 1 and item is doc else f"{where}[{i}]"
        run = SweepResult.from_dict(item, at)
        if run.kind is not None:
            try:
                classify(run.label, run.kind)
            except InputError:
                raise InputError(
                    "results", f"{at}.kind: {run.kind!r} is not a configuration kind", KINDS
                ) from None
        runs.append(run)
    return runs


def _ratio(a: tuple[str, float] | None, b: tuple[str, float] | None) -> float | None:
    if a is None or b is None or b[1] <= 0:
        return None
    return round(a[1] / b[1], 2)


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{float(value):,.{digits}f}"


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
