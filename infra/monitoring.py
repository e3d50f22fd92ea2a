"""Alarms, speculative-decoding metric filters and the dashboard of one endpoint.

The metric filters are built from `peagle_serve.contract`, the one definition of the
line the container prints; nothing here knows the line's format.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_logs as logs
from constructs import Construct
from peagle_serve.contract import (
    METRIC_DIMENSION,
    METRIC_FIELDS,
    METRIC_NAMESPACE,
    MetricField,
    metric_dimension_selector,
    metric_filter_pattern,
    metric_value_selector,
)

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
_UNITS = {u.value.replace("_", "").lower(): u for u in cw.Unit}


def cloudwatch_unit(unit: str) -> cw.Unit:
    """The CDK enum member for a CloudWatch unit name (`Count/Second` -> COUNT_PER_SECOND)."""
    normalized = unit.replace("/", "per").replace("_", "").replace(" ", "").lower()
    try:
        return _UNITS[normalized]
    except KeyError:
        raise ValueError(f"unknown CloudWatch unit {unit!r}") from None


@dataclass(frozen=True)
class AlarmThresholds:
    """When the endpoint is unhealthy; these alarms also roll back blue/green updates."""

    errors_5xx_per_minute: int = 5
    """Invocation5XXErrors (sum per minute) at or above which the alarm fires."""
    model_latency_p90_ms: int = 60_000
    """p90 ModelLatency in milliseconds above which the alarm fires (LLM generations)."""
    evaluation_minutes: int = 3
    """Consecutive breaching minutes before the alarm fires."""


class EndpointAlarms(Construct):
    """Alarms on the endpoint variant's 5xx errors and model latency.

    The endpoint name is a literal from the plan (not a reference to the endpoint
    resource), so the endpoint's AutoRollbackConfiguration can name these alarms
    without a dependency cycle.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        thresholds: AlarmThresholds,
    ) -> None:
        super().__init__(scope, construct_id)
        dims = {"EndpointName": endpoint_name, "VariantName": variant_name}
        self.errors_metric = cw.Metric(
            namespace=SAGEMAKER_NAMESPACE,
            metric_name="Invocation5XXErrors",
            dimensions_map=dims,
            statistic="Sum",
            period=Duration.minutes(1),
        )
        # ModelLatency is reported in microseconds.
        self.latency_metric = cw.Metric(
            namespace=SAGEMAKER_NAMESPACE,
            metric_name="ModelLatency",
            dimensions_map=dims,
            statistic="p90",
            period=Duration.minutes(1),
            unit=cw.Unit.MICROSECONDS,
        )
        self.invocations_metric = cw.Metric(
            namespace=SAGEMAKER_NAMESPACE,
            metric_name="InvocationsPerInstance",
            dimensions_map=dims,
            statistic="Sum",
            period=Duration.minutes(1),
        )
        self.errors_alarm = cw.Alarm(
            self,
            "Errors5xx",
            alarm_name=f"{endpoint_name}-5xx-errors",
            alarm_description=f"Invocation 5xx errors on {endpoint_name}/{variant_name}",
            metric=self.errors_metric,
            threshold=thresholds.errors_5xx_per_minute,
            evaluation_periods=thresholds.evaluation_minutes,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.latency_alarm = cw.Alarm(
            self,
            "ModelLatency",
            alarm_name=f"{endpoint_name}-model-latency-p90",
            alarm_description=(
                f"p90 model latency on {endpoint_name}/{variant_name} above "
                f"{thresholds.model_latency_p90_ms} ms"
            ),
            metric=self.latency_metric,
            threshold=thresholds.model_latency_p90_ms * 1000,
            evaluation_periods=thresholds.evaluation_minutes,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.alarms: list[cw.Alarm] = [self.errors_alarm, self.latency_alarm]


class AcceptanceMetrics(Construct):
    """Metric filters turning the container's metric lines into CloudWatch metrics.

    Each metric carries the `EndpointName` dimension, so several endpoints (stages) in one
    account and region keep separate metrics. A filter's dimension can only be read from
    the line, so the pattern matches only lines naming this endpoint: a container that
    names another (its `env`, an image of its own) publishes nothing under that name.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        log_group: logs.ILogGroup,
        endpoint_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.filters: dict[str, logs.MetricFilter] = {}
        self.metrics: dict[str, cw.Metric] = {}
        pattern = logs.FilterPattern.literal(metric_filter_pattern(endpoint_name))
        for field in METRIC_FIELDS:
            self.filters[field.metric_name] = logs.MetricFilter(
                self,
                field.metric_name,
                log_group=log_group,
                filter_pattern=pattern,
                metric_namespace=METRIC_NAMESPACE,
                metric_name=field.metric_name,
                metric_value=metric_value_selector(field),
                dimensions={METRIC_DIMENSION: metric_dimension_selector()},
                unit=cloudwatch_unit(field.unit),
            )
            self.metrics[field.metric_name] = self._metric(field)

    def _metric(self, field: MetricField) -> cw.Metric:
        return cw.Metric(
            namespace=METRIC_NAMESPACE,
            metric_name=field.metric_name,
            dimensions_map={METRIC_DIMENSION: self.endpoint_name},
            statistic="Average",
            period=Duration.minutes(1),
        )


class EndpointDashboard(Construct):
    """One dashboard: traffic, errors, latency and speculative-decoding acceptance."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        alarms: EndpointAlarms,
        acceptance: AcceptanceMetrics,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Invocations per instance", left=[alarms.invocations_metric], width=8
            ),
            cw.AlarmWidget(title="Invocation 5xx errors", alarm=alarms.errors_alarm, width=8),
            cw.AlarmWidget(title="Model latency p90 (us)", alarm=alarms.latency_alarm, width=8),
        )
        self.dashboard.add_widgets(
            *(
                cw.GraphWidget(title=name, left=[metric], width=6)
                for name, metric in acceptance.metrics.items()
            )
        )
