"""The resources the program registers, as the plan reads them: the types it looks for, a value by
dotted path, values made canonical (one program, one plan, byte for byte), secrets masked, and the
values the offline mock cloud made up told apart."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SECRET_MASK = "[secret]"
LAUNCH_TEMPLATE_TYPE = "aws:ec2/launchTemplate:LaunchTemplate"
NAT_GATEWAY_TYPE = "aws:ec2/natGateway:NatGateway"
CLUSTER_TYPES = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
SUBNET_TYPE = "aws:ec2/subnet:Subnet"
RAY_SERVICE_TYPE = "kubernetes:ray.io/v1:RayService"
# The stack's DaemonSets outside Helm: the Ray image pre-pulls (components/manifests/image_prepull.py).
PREPULL_TYPE = "kubernetes:apps/v1:DaemonSet"
SERVICE_TYPE = "kubernetes:core/v1:Service"
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
REPLICATION_GROUP_TYPE = "aws:elasticache/replicationGroup:ReplicationGroup"


def lookup(data: Any, path: str) -> Any:
    """Value at a dotted path; `*` maps over a list, a number indexes one. None when absent."""
    head, _, rest = path.partition(".")
    if isinstance(data, list):
        if head == "*":
            values = [lookup(item, rest) if rest else item for item in data]
            values = [v for v in values if v is not None]
            return values or None
        if head.isdigit() and int(head) < len(data):
            data = data[int(head)]
        else:
            return None
    elif isinstance(data, dict):
        data = data.get(head)
    else:
        return None
    if not rest or data is None:
        return data
    return lookup(data, rest)


def canonical(value: Any) -> Any:
    """Whole numbers as ints (the engine hands ints over as floats) and mapping keys sorted (it hands
    maps over in no fixed order), recursively: one program, one plan, byte for byte."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def masked(inputs: dict, secret_paths: Iterable[str]) -> dict:
    """`inputs` with every secret the engine marked (paths as the harness records them: `a.b[0].c`)
    replaced by SECRET_MASK."""
    secret = set(secret_paths)

    def walk(value: Any, path: str) -> Any:
        if path in secret:
            return SECRET_MASK
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    return walk(inputs, "")


def string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in string_leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in string_leaves(v)]
    return []


class OfflineValues:
    """Which plan values the offline mock cloud made up, from its record (`OfflineRun.invented`).

    A value counts when one of its strings is a made-up value, or contains a long made-up id (an ARN
    holds the account id, a kubeconfig the endpoint). Short made-up values match whole strings only,
    so a value that merely contains "us-west-2a" as text is not marked."""

    LONG_ID = 12

    def __init__(self, invented: dict[str, str]):
        self.exact = dict(invented)
        self.embedded = sorted((v, why) for v, why in invented.items()
                               if len(v) >= self.LONG_ID and any(c.isdigit() for c in v))

    def why(self, value: Any) -> str | None:
        for text in string_leaves(value):
            if text in self.exact:
                return self.exact[text]
            for token, why in self.embedded:
                if token in text:
                    return why
        return None

    def marks(self, values: dict[str, Any]) -> dict[str, str]:
        """{key: why} for the entries of `values` that hold a made-up value."""
        return {key: why for key, value in values.items() if (why := self.why(value)) is not None}
