"""Capacity: the endpoint-usage quota of the instance type, from Service Quotas."""

from __future__ import annotations

from typing import Any

import pytest
from doctor_testkit import REGION, ROLE, Account, by_check, make_plan, only_failure
from peagle_local.emulator.account_ext import SAGEMAKER, endpoint_quota_name


def test_quota_covering_the_count_passes(account: Account) -> None:
    plan = make_plan()
    account.stage(plan, endpoint_quota=1)
    line = by_check(account.doctor(plan))["capacity.quota"]
    assert line.status == "pass" and line.detail.startswith("applied quota 1 covers 1 instance")


def test_quota_of_zero_fails_with_the_increase_request(account: Account) -> None:
    plan = make_plan()
    account.stage(plan, endpoint_quota=0)
    failure = only_failure(account.doctor(plan))
    assert failure.check == "capacity.quota"
    assert failure.resource == "sagemaker quota 'ml.g7e.2xlarge for endpoint usage' (us-east-1)"
    assert failure.detail == (
        "the applied quota is 0 instances; the endpoint needs 1 (initial_instance_count)"
    )
    assert "request-service-quota-increase" in failure.fix and "--desired-value 1" in failure.fix


def test_scaling_maximum_counts(inprocess: Account) -> None:
    plan = make_plan(scaling={"min_instances": 1, "max_instances": 3})
    inprocess.stage(plan, endpoint_quota=2)
    failure = only_failure(inprocess.doctor(plan))
    assert "needs 3 (scaling.max_instances)" in failure.detail


def test_more_initial_instances_than_the_quota_fails(inprocess: Account) -> None:
    plan = make_plan(initial_instance_count=2)
    inprocess.stage(plan, endpoint_quota=1)
    assert "needs 2 (initial_instance_count)" in only_failure(inprocess.doctor(plan)).detail


def test_default_value_applies_when_no_applied_value_exists(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=1)
    inprocess.quotas.set_endpoint_quota(plan.instance_type, 2, region=REGION, applied=False)
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "pass" and line.detail.startswith("AWS default quota 2 covers")


def test_instance_type_not_offered_in_the_region_fails(inprocess: Account) -> None:
    plan = make_plan(instance_type="ml.g7e.4xlarge")
    inprocess.stage(make_plan())  # quotas exist for ml.g7e.2xlarge only
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "fail"
    assert "ml.g7e.4xlarge is not offered for SageMaker hosting in us-east-1" in line.detail


def test_no_quota_information_is_a_warning(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    inprocess.quotas._quotas.clear()
    inprocess.quotas.set_quota(SAGEMAKER, "Number of training jobs", 5, region=REGION)
    report = inprocess.doctor(plan)
    line = by_check(report)["capacity.quota"]
    assert report.ok and line.status == "warn" and "could not check" in line.detail


def test_quota_found_on_a_later_page(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=0)
    for i in range(250):  # sorted before the one asked for
        inprocess.quotas.set_quota(
            SAGEMAKER, f"ml.a{i:03d}.xlarge for endpoint usage", 1, region=REGION
        )
    inprocess.quotas.set_endpoint_quota(plan.instance_type, 2, region=REGION)
    inprocess.record()
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "pass"
    pages = [p for name, p in inprocess.calls if name == "ListServiceQuotas"]
    assert len(pages) == 3 and endpoint_quota_name(plan.instance_type).startswith("ml.g7e")


def test_service_quotas_denied_is_a_warning(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=0)
    inprocess.deny("ListServiceQuotas", "service-quotas")
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "warn" and "may not read Service Quotas" in line.detail


@pytest.fixture
def hosting_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto in-process knows no g7e; the emulator's check takes botocore's instance enum."""
    from moto.sagemaker import models
    from peagle_local.emulator import moto_ext

    monkeypatch.setattr(
        models.FakeEndpointConfig, "validate_instance_type", moto_ext._validate_instance_type
    )


def _running_endpoint(account: Account, name: str, instance_type: str, count: int) -> None:
    """An endpoint of the account that holds `count` instances of `instance_type`."""
    sm = account.client("sagemaker")
    sm.create_model(
        ModelName=f"{name}-m",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": make_plan().image_uri},
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": f"{name}-m",
        "InstanceType": instance_type,
        "InitialInstanceCount": count,
    }
    sm.create_endpoint_config(EndpointConfigName=f"{name}-c", ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-c")


@pytest.mark.usefixtures("hosting_types")
def test_instances_other_endpoints_hold_count_against_the_quota(account: Account) -> None:
    plan = make_plan()
    account.stage(plan, endpoint_quota=2)
    _running_endpoint(account, "team-a-chat", plan.instance_type, 2)
    _running_endpoint(account, "team-b-other-type", "ml.g7e.4xlarge", 4)
    failure = only_failure(account.doctor(plan))
    assert failure.check == "capacity.quota"
    assert failure.detail == (
        "the applied quota is 2 instances; the endpoint needs 1 (initial_instance_count); "
        "2 already run: team-a-chat 2"
    )
    assert failure.fix.endswith("--desired-value 3")


@pytest.mark.usefixtures("hosting_types")
def test_the_endpoints_own_fleet_counts_during_an_update(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=1)
    _running_endpoint(inprocess, plan.endpoint_name, plan.instance_type, 1)
    failure = only_failure(inprocess.doctor(plan))
    assert f"1 already run: {plan.endpoint_name} 1 (this endpoint" in failure.detail
    assert failure.fix.endswith("--desired-value 2")


@pytest.mark.usefixtures("hosting_types")
def test_quota_with_room_passes_and_names_the_usage(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=3)
    _running_endpoint(inprocess, "team-a-chat", plan.instance_type, 2)
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "pass"
    assert line.detail == (
        "applied quota 3 covers 1 instance(s) (initial_instance_count); "
        "2 already run: team-a-chat 2"
    )


def test_usage_that_cannot_be_read_is_a_warning(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=4)
    inprocess.deny("ListEndpoints", "sagemaker")
    report = inprocess.doctor(plan)
    line = by_check(report)["capacity.quota"]
    assert report.ok and line.status == "warn"
    assert "could not be counted (AccessDenied)" in line.detail
    assert "sagemaker:ListEndpoints" in line.fix


def test_an_experiment_needs_the_candidates_fleet_beside_the_incumbents() -> None:
    """Before the endpoint exists (a stage's first deploy): the spec's counts."""
    import typing
    from types import SimpleNamespace

    from peagle_deploy.doctor.capacity import instances_for
    from peagle_deploy.spec import spec_from_dict

    def instances_needed(ctx: typing.Any) -> tuple[int, str]:
        return instances_for(ctx.plan.spec)

    spec = spec_from_dict(
        {
            "model": "gpt-oss-20b",
            "initial_instance_count": 2,
            "experiment": {"mode": "shadow", "sampling_percent": 50, "candidate": {}},
        }
    )
    ctx: typing.Any = SimpleNamespace(plan=SimpleNamespace(spec=spec))
    assert instances_needed(ctx) == (
        3,
        "2 for initial_instance_count + 1 for the experiment's candidate",
    )
    split = spec.model_copy(
        update={
            "experiment": spec.experiment.model_copy(  # type: ignore[union-attr]
                update={"mode": "split", "sampling_percent": None, "weight_percent": 50}
            )
        }
    )
    ctx.plan.spec = split
    assert instances_needed(ctx)[0] == 4  # 50/50 over 2 incumbent instances: 2 more


def _scaled_to(account: Account, plan: Any, count: int) -> None:
    """The plan's endpoint, created on 1 instance and moved to `count` by its scaling
    (UpdateEndpointWeightsAndCapacities is what Application Auto Scaling calls)."""
    _running_endpoint(account, plan.endpoint_name, plan.instance_type, 1)
    account.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=plan.endpoint_name,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": count}],
    )


@pytest.mark.usefixtures("hosting_types")
def test_an_experiment_on_an_endpoint_scaled_to_six_sizes_the_candidate_from_six(
    inprocess: Account,
) -> None:
    """Its config says 1, it runs 6: the candidate (shadow at 100 %) gets 6, and the
    incumbent's 6 run beside the fleet serving now, as `peagle experiment start` does."""
    experiment = {"mode": "shadow", "sampling_percent": 100, "candidate": {}}
    plan = make_plan(experiment=experiment, scaling={"min_instances": 1, "max_instances": 8})
    inprocess.stage(plan, endpoint_quota=17)
    _scaled_to(inprocess, plan, 6)
    failure = only_failure(inprocess.doctor(plan))
    assert failure.detail == (
        "the applied quota is 17 instances; the endpoint needs 12 (6 the incumbent runs now "
        f"+ 6 for the experiment's candidate); 6 already run: {plan.endpoint_name} 6 (this "
        "endpoint, until an update has moved traffic)"
    )
    assert failure.fix.endswith("--desired-value 18")


@pytest.mark.usefixtures("hosting_types")
def test_a_deploy_onto_an_endpoint_scaled_above_its_new_maximum_keeps_its_count(
    inprocess: Account,
) -> None:
    """A scaled stage's update keeps the 6 instances the endpoint runs, beside the 6 it
    runs until traffic has moved, though the spec's scaling now stops at 4."""
    plan = make_plan(scaling={"min_instances": 1, "max_instances": 4})
    inprocess.stage(plan, endpoint_quota=11)
    _scaled_to(inprocess, plan, 6)
    failure = only_failure(inprocess.doctor(plan))
    assert "needs 6 (the instances it runs now, which an update keeps)" in failure.detail
    assert failure.fix.endswith("--desired-value 12")


@pytest.mark.usefixtures("hosting_types")
def test_without_scaling_a_deploy_needs_the_specs_count_whatever_runs_now(
    inprocess: Account,
) -> None:
    """A stage without `scaling:` sets its spec's count on update: no false alarm."""
    plan = make_plan()
    inprocess.stage(plan, endpoint_quota=7)
    _scaled_to(inprocess, plan, 6)
    line = by_check(inprocess.doctor(plan))["capacity.quota"]
    assert line.status == "pass" and "covers 1 instance(s) (initial_instance_count)" in line.detail
