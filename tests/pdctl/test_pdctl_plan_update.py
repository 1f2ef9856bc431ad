"""`pdctl plan --diff base.json` plans the change as an update of the stack the base plan deployed:
its subnets, GPU zone, NAT and IAM roles stay, as `pulumi preview` keeps them from what AWS reports."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pdctl.cli import app
from pdctl.plan import build_plan

KEPT = {"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway", "aws:ec2/eip:Eip",
        "aws:ec2/routeTable:RouteTable", "eks:index:Cluster", "aws:iam/role:Role"}


def test_a_new_gpu_type_offered_in_the_gpu_zone_changes_nothing_of_the_network_or_cluster(offline_run, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(build_plan(offline_run("dev"), stack="dev").to_dict(), default=str))
    # g6e.8xlarge is offered in every AZ (a new stack would take usw2-az1 for it): the stack keeps usw2-az2.
    result = CliRunner().invoke(app, ["plan", "--stack", "dev", "--set", "gpuNodeType=g6e.8xlarge", "--diff", str(base),
                                      "--output", "json"])
    assert result.exit_code == 3, result.output
    diff = json.loads(result.stdout)
    assert {r["type"] for r in diff["resources"]} & KEPT == set()
    assert {(r["name"], r["action"]) for r in diff["resources"]} == {
        ("gpu-nodes", "replace"), ("inference-rayservice", "replace")}
