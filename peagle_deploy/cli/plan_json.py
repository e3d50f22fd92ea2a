"""The spec a command line asks for, and the document `peagle plan --json` prints.

Imports no CLI library: the typer command (peagle_deploy.cli.plan) and the fast path
(peagle_deploy.cli.fast_plan) both call these, so the two cannot print different plans.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from peagle_deploy.errors import InputError

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan
    from peagle_deploy.spec.models import DeploymentSpec


def load_cli_spec(file: Path | None, model: str | None, knobs: dict[str, Any]) -> DeploymentSpec:
    """The spec file (if any) with MODEL and the flags on top; InputError without a model."""
    from peagle_deploy.spec import load_spec

    if file is None and model is None:
        raise InputError("model", "no model given", "a MODEL argument or --file with `model:`")
    if file is not None and model is not None:
        _say_which_model(file, model)
    return load_spec(file, file_field="--file", model=model, **knobs)


def _say_which_model(file: Path, model: str) -> None:
    """MODEL wins over the file's `model:`, as every flag does; a warning says so when the
    two differ (it replaced it silently)."""
    from peagle_deploy.documents import load_mapping

    named = load_mapping(file, "--file").get("model")
    if named is not None and named != model:
        from peagle_deploy.cli import output

        output.warn(f"MODEL {model!r} replaces the spec file's model: {named!r} ({file})")


def training_document(
    file: Path | None, model: str | None, knobs: dict[str, Any]
) -> dict[str, Any] | None:
    """The training plan (`peagle_deploy.train.plan.plan_document`) when `file` is a
    training spec (top-level `train:`), else None. Read only with --file, so `peagle plan
    MODEL` never loads the training planner."""
    if file is None:
        return None
    from peagle_deploy.documents import load_mapping
    from peagle_deploy.train.spec import TRAIN_KEY

    if TRAIN_KEY not in load_mapping(file, "--file"):
        return None
    if model is not None or knobs:
        given = f"MODEL {model!r}" if model is not None else f"the flag for {sorted(knobs)[0]}"
        raise InputError(
            "--file",
            f"{file} is a training spec (`train:`): it takes no MODEL or deployment flags "
            f"(got {given})",
            "peagle plan --file TRAIN_SPEC [--json]",
        )
    from peagle_deploy.train.plan import build_training_plan, plan_document
    from peagle_deploy.train.spec import load_training_spec

    return plan_document(build_training_plan(load_training_spec(file)))


def plan_with_experiment(spec: DeploymentSpec) -> tuple[Plan, dict[str, Any] | None]:
    """The plan of `spec` and, when the spec has an experiment, the experiment's requests."""
    from peagle_deploy.plan import build_plan

    plan = build_plan(spec)
    if spec.experiment is None:
        return plan, None
    from peagle_deploy.experiment.plan import experiment_plan

    return plan, experiment_plan(spec).to_json()


def plan_document(plan: Plan, experiment: dict[str, Any] | None) -> dict[str, Any]:
    """What `peagle plan --json` prints: the plan, and its experiment when there is one."""
    extra = {"experiment": experiment} if experiment is not None else {}
    return {**plan.to_json(), **extra}
