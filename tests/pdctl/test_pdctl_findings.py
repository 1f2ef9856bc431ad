"""Waste and late failures a plan reports: a warning line each, naming the setting to change, and
`--strict` fails on them (what CI runs)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pdctl.cli import app


def plan(*args: str):
    return CliRunner().invoke(app, ["plan", *args, "--strict"])


@pytest.mark.parametrize(("args", "finding"), [
    # Each pod takes a whole p5.48xlarge (8 H100s); an engine of tensor parallel 1 uses one.
    (("--set", "gpuNodeType=p5.48xlarge"),
     "tensorParallelSize: prefill engines use 1 of the 8 GPUs the prefill pods take on 1 × p5.48xlarge (7 idle)"),
    (("--set", "gpuNodeCount=3"), "gpuNodeCount: 1 of 3 g6.8xlarge nodes run no replica; lower it to 2"),
    (("--set", "kuberayChartVersion=9.9.9"), "kuberayChartVersion: 9.9.9 is not a kuberay-operator version recorded"),
    (("--stack", "prod"), "apiPublicAccessCidrs: got ['203.0.113.0/24']"),
    (("--stack", "prod"), "adminPrincipalArns: got ['arn:aws:iam::111122223333:role/platform-admin']"),
])
def test_a_finding_is_a_warning_naming_the_setting_and_fails_a_strict_plan(args, finding):
    result = plan(*args)
    assert result.exit_code == 1, result.output
    assert f"warning: {finding}" in result.stderr
    assert "--strict:" in result.stderr


def test_the_reference_deployment_has_no_finding():
    result = plan()
    assert result.exit_code == 0, result.stderr
    assert "warning:" not in result.stderr
    # Its door has no key yet: said plainly, as a note, not a finding.
    text = " ".join(result.stdout.split())
    assert "API keys: none;" in text
    assert "note: frontDoor internal with no apiKeys: the door refuses every request (401)" in text
