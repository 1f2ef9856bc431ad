"""Pinned Helm chart versions (never a range, never latest)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from serve_app.stack_keys import StackKeyModel

_CHART_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")

def _chart_version(value: str) -> str:
    if not _CHART_VERSION.match(value):
        raise ValueError("not a pinned chart version")
    return value


ChartVersion = Annotated[str, AfterValidator(_chart_version)]


class ChartSettings(StackKeyModel):
    """Pinned Helm chart versions (never a range, never latest)."""

    kuberay: ChartVersion = Field(alias="kuberayChartVersion", description="an exact chart version like 1.7.0")
    nvidia_device_plugin: ChartVersion = Field(
        alias="nvidiaDevicePluginChartVersion", description="an exact chart version like 0.20.0")
    efa_device_plugin: ChartVersion = Field(
        alias="efaDevicePluginChartVersion", description="an exact chart version like v0.5.30")
    kube_prometheus_stack: ChartVersion = Field(
        alias="kubePrometheusStackChartVersion", description="an exact chart version like 88.5.3")
    dcgm_exporter: ChartVersion = Field(
        alias="dcgmExporterChartVersion", description="an exact chart version like 4.8.2")
    cluster_autoscaler: ChartVersion = Field(
        alias="clusterAutoscalerChartVersion", description="an exact chart version like 9.59.0")


# Prometheus keeps this share of its volume for blocks (`retentionSize`) and deletes the oldest
