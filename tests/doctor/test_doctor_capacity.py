"""Capacity: the endpoint-usage quota of the instance type, from Service Quotas."""

from __future__ import annotations

from doctor_testkit import REGION, Account, by_check, make_plan, only_failure

from peagle_deploy.emulator.account_ext import SAGEMAKER, endpoint_quota_name


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
