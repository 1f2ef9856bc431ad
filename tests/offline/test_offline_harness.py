"""The offline runner must feed a program what the Pulumi CLI would, or every other offline test lies.

These tests use a tiny project of their own, so they pin the runner's contract (config merge, secret
handling, dependency recording, isolation between runs) independently of the real stack.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pulumi
import pytest

from offline import stack_config, try_run_offline
from offline.harness import offline_secret_placeholder


class EchoMocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "Pulumi.yaml").write_text(textwrap.dedent("""\
        name: demo
        runtime: python
        config:
          count: {type: integer, default: 2}
          zones: {type: array, default: ["a"]}
          token: {type: string, secret: true, default: ""}
          label: {type: string, default: from-project}
        """))
    (tmp_path / "Pulumi.dev.yaml").write_text(textwrap.dedent("""\
        config:
          aws:region: eu-west-1
          demo:count: 3
          demo:token:
            secure: AAABAGVuY3J5cHRlZA==
        """))
    (tmp_path / "__main__.py").write_text(textwrap.dedent("""\
        import pulumi
        cfg = pulumi.Config()
        if cfg.require_int("count") > 5:
            raise ValueError("count too big")

        class Box(pulumi.ComponentResource):
            def __init__(self, name, opts=None):
                super().__init__("demo:index:Box", name, None, opts)
                self.inner = pulumi.CustomResource("demo:index:Inner", f"{name}-inner", {"n": 1},
                                                   opts=pulumi.ResourceOptions(parent=self))
                self.register_outputs({})

        box = Box("box")
        after = pulumi.CustomResource("demo:index:After", "after", {"secret": cfg.require_secret("token")},
                                      opts=pulumi.ResourceOptions(depends_on=[box]))
        pulumi.export("count", cfg.require_int("count"))
        pulumi.export("zones", cfg.require_object("zones"))
        pulumi.export("label", cfg.get("label"))
        pulumi.export("token", cfg.require_secret("token"))
        """))
    return tmp_path


def test_stack_file_overrides_project_defaults_and_secure_values_stay_secret(project: Path):
    config, secret_keys = stack_config("dev", project)
    assert config["demo:count"] == "3"  # stack file wins
    assert config["demo:label"] == "from-project"  # project default kept
    assert config["demo:zones"] == '["a"]'  # arrays travel as JSON text, as the CLI sends them
    assert config["aws:region"] == "eu-west-1"
    assert config["demo:token"] == offline_secret_placeholder("token")
    assert secret_keys == {"demo:token"}


def test_run_records_graph_outputs_and_secrets(project: Path):
    run = try_run_offline("dev", project_dir=project, mocks=EchoMocks(), secrets={"token": "s3cr3t"})
    assert run.error is None
    assert run.outputs == {"count": 3, "zones": ["a"], "label": "from-project", "token": "s3cr3t"}
    assert run.secret_outputs == {"token"}
    after = run.one("demo:index:After")
    assert run.depends_on(after, run.one("demo:index:Box"))
    assert run.depends_on(after, run.one("demo:index:Inner"))
    assert not run.depends_on(run.one("demo:index:Box"), after)
    assert "secret" in after.secret_paths and after.inputs["secret"] == "s3cr3t"
    assert run.one("demo:index:Inner").parent == run.one("demo:index:Box").urn


def test_failed_run_reports_error_and_runs_are_isolated(project: Path):
    failed = try_run_offline("dev", project_dir=project, mocks=EchoMocks(), overrides={"count": "9"})
    assert isinstance(failed.error, ValueError) and "count too big" in str(failed.error)
    assert failed.registered == []
    again = try_run_offline("dev", project_dir=project, mocks=EchoMocks())
    assert again.error is None and again.outputs["count"] == 3
    assert len(again.all("demo:index:Inner")) == 1


def test_unknown_stack_names_the_stacks_that_exist(project: Path):
    from serve_app.errors import ConfigError

    with pytest.raises(ConfigError, match=r"stack: got 'prod'; allowed: dev"):
        try_run_offline("prod", project_dir=project, mocks=EchoMocks())


def test_the_mock_cloud_records_what_it_makes_up_and_nothing_the_stack_chose():
    from offline.mock_cloud import ACCOUNT_ID

    run = try_run_offline("prod")
    assert run.error is None
    invented = run.invented
    subnet = run.all("aws:ec2/subnet:Subnet")[0]
    # Ids, ARNs, the account and the AZ names come from the mocks...
    [subnet_id] = [v for v, why in invented.items() if why == f"the offline mock's id of {subnet.type} {subnet.name}"]
    assert subnet_id.startswith("subnet-")
    assert ACCOUNT_ID in invented and subnet.inputs["availabilityZone"] in invented
    key_arn = run.one("eks:index:Cluster").inputs["encryptionConfigKeyArn"]
    assert "arn of aws:kms/key:Key" in invented[key_arn]
    # ...the region, names, CIDRs and chart versions the stack file or the program chose do not.
    for chosen in ("us-west-2", "ray-llm-prod", "10.20.0.0/16", "203.0.113.0/24", "1.7.0", "inference"):
        assert chosen not in invented


def test_mocks_that_keep_no_record_leave_it_empty(project: Path):
    assert try_run_offline("dev", project_dir=project, mocks=EchoMocks()).invented == {}


def test_a_key_set_twice_in_a_stack_file_is_refused_naming_it_and_both_lines(project: Path):
    from serve_app.errors import ConfigError

    (project / "Pulumi.twice.yaml").write_text(textwrap.dedent("""\
        config:
          demo:count: 3
          aws:region: eu-west-1
          demo:count: 4
        """))
    with pytest.raises(ConfigError) as caught:
        stack_config("twice", project)
    assert caught.value.setting == "demo:count"
    assert "lines 2 and 4" in str(caught.value) and "Pulumi.twice.yaml" in str(caught.value)
    # The same key in two different mappings is no duplicate.
    (project / "Pulumi.nested.yaml").write_text("config:\n  demo:count: 3\nenvironment:\n  demo:count: 1\n")
    assert stack_config("nested", project)[0]["demo:count"] == "3"


@pytest.mark.parametrize("region", ["ap-northeast-3", "af-south-1"])
def test_a_region_without_offerings_on_record_plans_and_says_what_is_unknown(region):
    # af-south-1 is an opt-in region: the offline plan cannot know the account opted in, a real preview can.
    # Neither has offerings on record: the plan says so instead of offering every type silently.
    run = try_run_offline("dev", overrides={"aws:region": region})
    assert run.error is None, run.error
    assert any(f"which AZs of {region} offer g6.8xlarge is not recorded offline" in w for w in run.warnings)


def test_a_region_with_offerings_on_record_warns_of_nothing_unrecorded():
    assert not any("not recorded offline" in w for w in try_run_offline("dev").warnings)


def test_an_unrecorded_general_purpose_system_type_plans_as_its_name_says_and_the_plan_says_so():
    run = try_run_offline("dev", overrides={"systemNodeType": "m6i.xlarge"})
    assert run.error is None, run.error
    assert any("m6i.xlarge is not recorded offline" in w and "4 vCPUs, 16 GiB, x86_64" in w for w in run.warnings)
    # Too small as its name says: refused as EC2's own answer would be.
    small = try_run_offline("dev", overrides={"systemNodeType": "c6i.large"})
    assert "2 vCPUs and 4 GiB" in str(small.error)
