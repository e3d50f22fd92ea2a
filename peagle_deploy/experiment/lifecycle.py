"""The experiment's SDK functions, in one place to import them from.

- `start_experiment` (`experiment.start`): the candidate's model, then by mode a shadow
  InferenceExperiment (`experiment.shadow`) or a split endpoint config and UpdateEndpoint
  (`experiment.split`); waits until both variants serve. A start interrupted while it
  waits is resumed by running it again with the same spec.
- `experiment_status` (`experiment.status`): reads only: the endpoint (and its
  InferenceExperiment), the variants' observations (`experiment.fetch`), then the
  analysis.
- `conclude_experiment`, `abort_experiment`, `watch_experiment` (`experiment.end`): the
  decision rule acted on, the endpoint back on the incumbent alone, a winning candidate
  deployed with `deploy_peagle` and recorded in the stage manifest.

A failed start leaves the incumbent serving and removes what it created. The record
(`peagle_deploy.records`, kind `experiment`) says where an experiment stands; the
endpoint's own variants are checked against it at every step.
"""

from __future__ import annotations

from peagle_deploy.experiment.common import ExperimentError, check_reason
from peagle_deploy.experiment.end import (
    ExperimentOutcome,
    abort_experiment,
    conclude_experiment,
    watch_experiment,
)
from peagle_deploy.experiment.start import start_experiment
from peagle_deploy.experiment.status import ExperimentStatus, experiment_status

__all__ = [
    "ExperimentError",
    "ExperimentOutcome",
    "ExperimentStatus",
    "abort_experiment",
    "check_reason",
    "conclude_experiment",
    "experiment_status",
    "start_experiment",
    "watch_experiment",
]
