"""Where the cluster commands look: the RayService and the kubeconfig that reaches it, and the
Kubernetes API's answers as one-line errors."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import typer

from pdctl import endpoint
from pdctl.commands.common import (
    fail,
)

# ------------------------------------------------------------------------------- cluster

KUBECONFIG_OPTION = typer.Option(
    None, "--kubeconfig", help="Kubeconfig file (default: the stack's kubeconfig output when --stack or "
                               "--from-file is given, else $KUBECONFIG or ~/.kube/config).")
CONTEXT_OPTION = typer.Option(None, "--context", help="Kubeconfig context.")
NAMESPACE_OPTION = typer.Option(None, "--namespace", "-n", help="Serving namespace (default: the stack output).")
NAME_OPTION = typer.Option(None, "--name", help="RayService name (default: the stack output).")


@dataclass(frozen=True)
class ClusterTarget:
    """Where a cluster command looks: the RayService and the kubeconfig that reaches it."""

    namespace: str
    name: str
    kubeconfig: Path | None
    context: str | None
    outputs: dict

    def update_kubeconfig_command(self) -> str:
        region = self.outputs.get(endpoint.OUTPUT_REGION) or "<region>"
        cluster = self.outputs.get(endpoint.OUTPUT_CLUSTER) or "<clusterName>"
        return f"aws eks update-kubeconfig --region {region} --name {cluster}"


@contextmanager
def cluster_target(namespace: str | None, name: str | None, kubeconfig: Path | None,
                   context: str | None, stack: str | None, from_file: Path | None) -> Iterator[ClusterTarget]:
    """The RayService and kubeconfig a cluster command uses, read like `connect` and `client-config`
    read them: flags first, then the stack outputs (`pulumi stack output`, or --from-file).

    The stack's kubeconfig output is a secret: it is read only when --stack or --from-file names the
    stack and no --kubeconfig is given, and lives in a private (0600) file while the command runs."""
    use_stack_kubeconfig = kubeconfig is None and (stack is not None or from_file is not None)
    outputs: dict = {}
    if namespace is None or name is None or use_stack_kubeconfig:
        try:
            outputs = endpoint.read_stack_outputs(stack, from_file, secrets=use_stack_kubeconfig)
        except endpoint.EndpointError as exc:
            raise fail(f"{exc}; or name the RayService with --namespace and --name") from None
    namespace = namespace or outputs.get(endpoint.OUTPUT_NAMESPACE)
    name = name or outputs.get(endpoint.OUTPUT_RAY_SERVICE)
    if not namespace or not name:
        raise fail("which RayService? the stack outputs have no namespace/rayServiceName "
                   f"(have: {', '.join(sorted(outputs)) or 'none'}); pass --namespace and --name", 2)
    with tempfile.TemporaryDirectory() as scratch:
        if use_stack_kubeconfig:
            value = outputs.get(endpoint.OUTPUT_KUBECONFIG)
            if value in (None, "", endpoint.HIDDEN_SECRET):
                raise fail("the stack's kubeconfig output is missing or hidden: save the outputs with "
                           "`pulumi stack output --json --show-secrets`, or pass --kubeconfig")
            kubeconfig = Path(scratch) / "kubeconfig"
            kubeconfig.touch(mode=0o600)
            kubeconfig.write_text(value if isinstance(value, str) else json.dumps(value))
        yield ClusterTarget(namespace, name, kubeconfig, context, outputs)


def kube_reader(target: ClusterTarget):
    from kubernetes.config import ConfigException

    from pdctl.kube import KubeReader

    try:
        return KubeReader(str(target.kubeconfig) if target.kubeconfig else None, target.context)
    except ConfigException as exc:
        raise fail(f"kubeconfig: {exc}. Write one with `{target.update_kubeconfig_command()}`, or pass "
                   "--stack/--from-file to use the stack's kubeconfig output") from None


def kube_call(what: str, call, target: ClusterTarget):
    """`call()`, with the Kubernetes API's refusals as one line that says what to do next."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return call()
    except ApiException as exc:
        update = target.update_kubeconfig_command()
        hint = {
            401: "the cluster did not accept your credentials: does `aws sts get-caller-identity` show an "
                 f"identity with an access entry (adminPrincipalArns)? Refresh with `{update}`",
            403: "your identity's access entry does not allow this (the stack's admins get "
                 "AmazonEKSClusterAdminPolicy)",
            404: "not found: is the stack deployed (`pulumi up`)? Is this the stack's cluster "
                 f"(`{update}`)? Or name it with --namespace/--name",
        }.get(exc.status, "")
        message = f"{what}: Kubernetes API answered {exc.status} {exc.reason}" + (f"; {hint}" if hint else "")
        raise fail(message) from None
    except HTTPError as exc:
        raise fail(f"{what}: cannot reach the Kubernetes API: {exc}. prod's endpoint admits only "
                   "apiPublicAccessCidrs; is this the stack's cluster "
                   f"(`{target.update_kubeconfig_command()}`)?") from None
