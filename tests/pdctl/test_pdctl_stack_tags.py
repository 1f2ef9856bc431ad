"""`pdctl stack-tags`: from a running stack's `pulumi stack export`, the one command an administrator runs
so that the stack's EC2 resources, created without the stack tag, carry it before the first `pulumi up`
of the release whose deploy roles change only what carries it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from components.config.names import STACK_TAG
from pdctl.cli import app
from pdctl.stack_tags import ec2_types_taking_tags, untagged_ec2_ids

CLUSTER = "ray-llm-multinode"  # Pulumi.dev.yaml clusterName


def export_before_the_stack_tag(run) -> dict:
    """`pulumi stack export` of the dev stack as a release before the stack tag deployed it: each
    resource's recorded tags without it (the KMS key and the roles carried it already)."""
    resources = []
    for r in run.resources:
        tags = dict(r.inputs.get("tags") or {})
        if r.type in ec2_types_taking_tags():
            tags.pop(STACK_TAG, None)
        outputs = {**r.inputs, "tags": tags}
        if r.type == "aws:ec2/placementGroup:PlacementGroup":
            outputs["placementGroupId"] = f"pg-{r.name}"
        resources.append({"urn": r.urn, "type": r.type, "id": f"{r.name}-id", "outputs": outputs})
    return {"version": 3, "deployment": {"resources": resources}}


def test_every_ec2_resource_without_the_stack_tag_is_named_by_the_id_create_tags_takes(offline_run):
    run = offline_run("dev")
    export = export_before_the_stack_tag(run)
    ids = untagged_ec2_ids(export, CLUSTER)
    expected = {r.name for r in run.resources if r.type in ec2_types_taking_tags()}
    # The network, the launch templates, the placement group (by its pg- id, not its name), the EFA group
    # and its rules; no route table association (it takes no tags), no role or key.
    assert {i.removesuffix("-id") for i in ids if i.endswith("-id")} | {"gpu-nodes-placement"} == expected
    assert "pg-gpu-nodes-placement" in ids and "gpu-nodes-placement-id" not in ids
    assert not [i for i in ids if "association" in i or "role" in i or "secrets" in i]
    # Once tagged (the state of this release), nothing is left; another cluster's tag is not this one's.
    assert untagged_ec2_ids({"deployment": {"resources": [
        {**r, "outputs": {**r["outputs"], "tags": {STACK_TAG: CLUSTER}}} for r in export["deployment"]["resources"]]}},
        CLUSTER) == []
    assert len(untagged_ec2_ids(export, "ray-llm-prod")) == len(ids)


def test_the_command_prints_one_create_tags_line_and_refuses_what_is_no_export(offline_run, tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(export_before_the_stack_tag(offline_run("dev"))))
    result = CliRunner().invoke(app, ["stack-tags", "--stack", "dev", "--state", str(path)])
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    command, _, rest = line.partition(" --resources ")
    resources, _, tags = rest.partition(" --tags ")
    assert command == "aws ec2 create-tags --region us-west-2"
    assert {"network-vpc-id", "pg-gpu-nodes-placement", "gpu-nodes-lt-id"} <= set(resources.split())
    assert tags == f"Key={STACK_TAG},Value={CLUSTER}"
    path.write_text("{}")
    refused = CliRunner().invoke(app, ["stack-tags", "--stack", "dev", "--state", str(path)])
    assert refused.exit_code == 2 and "--state" in refused.output and "pulumi stack export" in refused.output
