"""What an endpoint's own description says it runs (`records.serving`)."""

from __future__ import annotations

from peagle_deploy.plan.render import VARIANT_NAME
from peagle_deploy.records.serving import ALL_TRAFFIC, current_instances


def test_the_variant_is_the_planners() -> None:
    """Spelled in records so that reading them does not import the planner."""
    assert ALL_TRAFFIC == VARIANT_NAME


def test_current_instances_is_what_scaling_asked_for_else_what_runs() -> None:
    def described(**counts: int) -> dict[str, object]:
        return {"ProductionVariants": [{"VariantName": "AllTraffic", **counts}]}

    assert current_instances(described(DesiredInstanceCount=6, CurrentInstanceCount=4)) == 6
    assert current_instances(described(CurrentInstanceCount=4)) == 4
    assert current_instances(described()) is None
    assert current_instances({"ProductionVariants": [{"VariantName": "Other"}]}) is None
    assert current_instances(None) is None
