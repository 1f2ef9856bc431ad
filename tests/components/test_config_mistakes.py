"""Stack-file mistakes a newcomer makes, each answered with one short line that starts with the hint
and names the setting to change (not the first setting whose default cannot deploy)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.project import find_project_dir
from offline import try_run_offline
from serve_app.errors import ConfigError

REPO = find_project_dir()
DEV = (REPO / "Pulumi.dev.yaml").read_text()
# Long enough for a hint and the numbers it names; the old unknown-key line was 1,400 characters.
SHORT = 160


def mistake(tmp_path: Path, stack_file: str) -> ConfigError:
    """The error a plan of a stack file `stack_file` (in a copy of the project) stops with."""
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy2(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "dashboards", tmp_path / "dashboards")
    (tmp_path / "Pulumi.mine.yaml").write_text(stack_file)
    try:
        run = try_run_offline("mine", project_dir=tmp_path)
    except ConfigError as error:  # a stack file that cannot be read at all
        return error
    assert isinstance(run.error, ConfigError), run.error
    assert not run.registered, "a refused stack registered resources"
    return run.error


@pytest.mark.parametrize(("stack_file", "message"), [
    (DEV + "  eks-pd-llm:gpuNodeCont: 3\n", "unknown setting `gpuNodeCont`: did you mean `gpuNodeCount`?"),
    (DEV + "  eks-pd-lm:gpuNodeCount: 3\n",
     "unknown namespace in `eks-pd-lm:gpuNodeCount`: did you mean `eks-pd-llm:gpuNodeCount`?"),
    (DEV.replace("config:", "configs:"), "unknown top-level key `configs` in Pulumi.mine.yaml: did you mean `config`?"),
])
def test_a_typo_is_answered_with_the_hint_first(tmp_path, stack_file, message):
    assert str(mistake(tmp_path, stack_file)) == message


@pytest.mark.parametrize("stack_file", ["", "# nothing yet\n", "config: {}\n"])
def test_an_empty_stack_file_is_named_not_blamed_on_a_setting(tmp_path, stack_file):
    error = str(mistake(tmp_path, stack_file))
    assert error.startswith("Pulumi.mine.yaml sets no `config:`"), error
    assert len(error) < SHORT


def test_a_lowered_gpu_memory_utilization_names_it_not_the_model(tmp_path):
    error = mistake(tmp_path, DEV + '  eks-pd-llm:gpuMemoryUtilization: "0.75"\n')
    assert error.setting == "gpuMemoryUtilization", error
    # (17,078 MiB of weights + 756 MiB reserve, the rotary position table included) / 22,888 MiB = 0.779
    assert "more than 0.78" in str(error) and len(str(error)) < SHORT


def test_too_few_gpu_nodes_names_gpu_node_count_not_the_replicas(tmp_path):
    error = mistake(tmp_path, DEV + "  eks-pd-llm:gpuNodeCount: 1\n")
    assert error.setting == "gpuNodeCount", error
    assert str(error).startswith("gpuNodeCount: got 1; allowed: at least 2") and len(str(error)) < SHORT


@pytest.mark.parametrize(("lines", "setting", "said"), [
    ("  eks-pd-llm:cudaGraphMaxBatchSize: 64\n", "cudaGraphMaxBatchSize", "at most maxNumSeqs (32)"),
    ("  eks-pd-llm:maxNumBatchedTokens: 16\n", "maxNumBatchedTokens", "at least maxNumSeqs (32)"),
    ('  eks-pd-llm:apiKeyLimits: \'{"nobody": {"requestsPerMinute": 10}}\'\n', "apiKeyLimits",
     "no key is named 'nobody'"),
    ("  eks-pd-llm:gpuNodeType: g6.12xlarge\n  eks-pd-llm:tensorParallelSize: 3\n", "tensorParallelSize",
     "a divisor of 16"),
])
def test_an_engine_or_door_setting_that_would_be_ignored_or_fail_later_is_refused_by_name(tmp_path, lines, setting,
                                                                                          said):
    error = mistake(tmp_path, DEV + lines)
    assert error.setting == setting, error
    assert said in str(error) and len(str(error)) < SHORT, str(error)


def test_a_lowered_max_num_seqs_plans_with_the_default_cuda_graph_size(tmp_path):
    # cudaGraphMaxBatchSize's default follows it down: the user is not told about a setting never written.
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy2(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "dashboards", tmp_path / "dashboards")
    (tmp_path / "Pulumi.mine.yaml").write_text(DEV + "  eks-pd-llm:maxNumSeqs: 16\n")
    assert try_run_offline("mine", project_dir=tmp_path).error is None


@pytest.mark.parametrize(("lines", "setting", "said"), [
    ('  eks-pd-llm:gpuMemoryUtilization: "0.95"\n', "gpuMemoryUtilization", "at most 0.92"),
    ("  eks-pd-llm:region: us-east-1\n", "region", "did you mean `aws:region`?"),
])
def test_the_line_names_the_setting_the_user_wrote(tmp_path, lines, setting, said):
    error = mistake(tmp_path, DEV + lines)
    assert error.setting == setting, error
    assert said in str(error) and len(str(error)) < SHORT, str(error)


@pytest.mark.parametrize(("old", "new", "setting", "said"), [
    ("deletionProtection: false", "deletionProtection: yes", "deletionProtection", "got 'yes'"),
    ("- 0.0.0.0/0", "- 10.0.0.0/8", "apiPublicAccessCidrs", "10.0.0.0/8 is private"),
])
def test_a_value_the_cli_or_eks_would_not_take_is_refused_offline_too(tmp_path, old, new, setting, said):
    # PyYAML reads `yes` as true where the Pulumi CLI hands the program "yes"; EKS refuses private public-access CIDRs.
    assert old in DEV
    error = mistake(tmp_path, DEV.replace(old, new))
    assert error.setting == setting, error
    assert said in str(error) and len(str(error)) < SHORT, str(error)
