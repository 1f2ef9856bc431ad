"""Bad input, proven: generated stack configurations run through the real program under mocks.

Each example overrides one to three settings of the dev or prod stack with a value drawn from
valid, borderline and plainly wrong ones. Every run must end one of two ways:
- the full graph is registered (every resource type the unmodified stack registers) and the stack
  outputs exist; or
- it fails with the project's ConfigError naming the setting, and nothing but the root Stack was
  registered (no partial graph: the checks run before any resource).
Any other exception, or a ConfigError naming none of the changed settings, is a bug. A conflict
between two settings may be reported on the one left at its default (rayVersion when rayImage
names an image the project has no facts for): then the message must name the changed setting or quote its value.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from components.project import project_file
from offline import run_offline, try_run_offline
from offline.harness import STACK_TYPE
from serve_app.errors import ConfigError

STACKS = ("dev", "prod")

_INTS = st.one_of(st.integers(-3, 80).map(str), st.sampled_from(["", "abc", "1.5", "1e3", "99999999"]))
_BOOLS = st.sampled_from(["true", "false", "True", "yes", "1", ""])
_CHART_VERSIONS = st.sampled_from(["1.7.0", "v0.5.30", "0.20.0", "latest", "^1.7", "1.x", "", "1.7"])


def _json_lists(*items: object) -> st.SearchStrategy[str]:
    return st.sampled_from([json.dumps(i) if not isinstance(i, str) else i for i in items])


def _one_of(*values: str) -> st.SearchStrategy[str]:
    return st.sampled_from(values)


# Valid, borderline and wrong values for every stack setting (Pulumi.yaml `config:`).
VALUES: Mapping[str, st.SearchStrategy[str]] = {
    "aws:region": _one_of("us-west-2", "us-east-1", "eu-west-1", "us-west-3", "mars-north-1", ""),
    "clusterName": st.one_of(_one_of("ray-llm", "a" * 41, "Bad_Name", "-x", ""), st.text(max_size=8)),
    "kubernetesVersion": _one_of("1.35", "1.34", "1.20", "2.0", "latest", ""),
    "namespace": _one_of("inference", "serving", "kube-system", "default", "kuberay-system", "Bad", "a" * 64, ""),
    "vpcCidr": _one_of("10.0.0.0/16", "10.1.0.0/20", "172.16.0.0/16", "8.8.8.0/24", "10.0.0.0/8", "not-a-cidr",
                       "10.0.0.0/33", "10.0.0.1/16"),
    "azCount": _INTS,
    "natMode": _one_of("single", "perAz", "none", "PERAZ", ""),
    "systemNodeType": _one_of("m7i.xlarge", "m7i.large", "m7i.4xlarge", "g6.8xlarge", "t2.nano", "x.y", ""),
    "systemNodeCount": _INTS,
    "gpuNodeType": _one_of("g6.8xlarge", "g6.12xlarge", "g6.16xlarge", "g6.xlarge", "g5.8xlarge", "p5.48xlarge",
                           "m7i.xlarge", "nope", ""),
    "gpuNodeCount": _INTS,
    "gpuNodeMaxCount": _INTS,
    "gpuAvailabilityZone": _one_of("", "us-west-2a", "us-west-2b", "us-west-2d", "us-east-1a", "usw2-az3", "use1-az3",
                                   "zzz"),
    "gpuDiskGiB": _INTS,
    "gpuImageSnapshotId": _one_of("", "snap-0123456789abcdef0", "snap-01234567", "arn:aws:ec2:us-west-2::snapshot/"
                                  "snap-0123456789abcdef0", "arn:aws:ec2:eu-west-1::snapshot/snap-01234567",
                                  "snap-XYZ", "ami-0123456789abcdef0"),
    "prefillGpuNodeType": _one_of("", "g6.12xlarge", "g6.8xlarge", "g5.8xlarge", "p5.48xlarge", "g6.xlarge",
                                  "m7i.xlarge", "nope", " "),
    "prefillGpuNodeCount": _INTS,
    "prefillGpuNodeMaxCount": _INTS,
    "decodeGpuNodeType": _one_of("", "g6.12xlarge", "g6.16xlarge", "g5.48xlarge", "p5.48xlarge", "g6.4xlarge", "nope"),
    "decodeGpuNodeCount": _INTS,
    "decodeGpuNodeMaxCount": _INTS,
    "kuberayChartVersion": _CHART_VERSIONS,
    "nvidiaDevicePluginChartVersion": _CHART_VERSIONS,
    "efaDevicePluginChartVersion": _CHART_VERSIONS,
    "kubePrometheusStackChartVersion": _CHART_VERSIONS,
    "dcgmExporterChartVersion": _CHART_VERSIONS,
    "clusterAutoscalerChartVersion": _CHART_VERSIONS,
    "adminPrincipalArns": _json_lists([], ["arn:aws:iam::111122223333:role/ops"], ["not-an-arn"], "x", {}, "[1]"),
    "apiPublicAccessCidrs": _json_lists([], ["203.0.113.0/24"], ["0.0.0.0/0"], ["bad"], "not json", ["10.0.0.0/8"]),
    "deletionProtection": _BOOLS,
    "deployFromInsideVpc": _BOOLS,
    "iamPermissionsBoundaryArn": _one_of("", "arn:aws:iam::111122223333:policy/eks-pd-llm/boundary",
                                         "arn:aws:iam::aws:policy/AdministratorAccess", "boundary", " "),
    "hfToken": _one_of("", "hf_plaintexttoken"),  # plaintext: must be refused (secrets only)
    "rayServiceName": _one_of("ray-llm", "x" * 48, "Bad", "1abc", "llm-", ""),
    "rayImage": _one_of("", "rayproject/ray-llm:2.60.0-py311-cu128", "rayproject/ray:latest", "rayproject/ray", " "),
    "rayVersion": _one_of("2.58.0", "2.60.0", "2.x", "abc", ""),
    "initializingTimeout": _one_of("30m", "1h", "1h30m", "5m", "0", "forever", "600", "3600", ""),
    "upgradeStrategy": _one_of("None", "NewCluster", "NewClusterWithIncrementalUpgrade", "Blue", ""),
    "singleProcessEngine": _BOOLS,
    "rayImageCarriesRunaiStreamer": _BOOLS,
    "gcsFaultTolerance": _BOOLS,
    "httpFront": _one_of("serve-proxy", "haproxy", "HAProxy", "nginx", ""),
    "modelId": _one_of("qwen3.5-9b", "my-model", ""),
    "modelSource": _one_of("Qwen/Qwen3.5-9B", "s3://bucket/models/qwen", "s3://bucket", "",
                           "meta-llama/Llama-3.1-8B-Instruct"),
    "tokenizerSource": _one_of("", "Qwen/Qwen3.5-9B"),
    "maxModelLen": st.one_of(_INTS, _one_of("4096", "32768", "1000000")),
    "dtype": _one_of("bfloat16", "auto", "float16", "half", "float32", "float", "int3", ""),
    "quantization": _one_of("", "fp8", "FP8", "int8", "fp8 "),
    "gpuMemoryUtilization": _one_of("0.90", "0.5", "1.0", "1", "1.5", "0", "abc", "-0.1", ""),
    "enforceEager": _BOOLS,
    "cudaGraphMaxBatchSize": st.one_of(_INTS, _one_of("512", "513")),
    "maxNumSeqs": st.one_of(_INTS, _one_of("16", "256", "1024", "1025")),
    "maxNumBatchedTokens": st.one_of(_INTS, _one_of("15", "2048", "8192")),
    "visionInputs": _BOOLS,
    "kvCacheFromPlan": _BOOLS,
    "compileCacheInS3": _BOOLS,
    "streamBatchingIntervalMs": st.one_of(_INTS, _one_of("1000", "1001")),
    "pdDirectStreaming": _BOOLS,
    "tensorParallelSize": _INTS,
    "pipelineParallelSize": _INTS,
    "prefillReplicas": _INTS,
    "prefillMaxReplicas": _INTS,
    "decodeReplicas": _INTS,
    "decodeMaxReplicas": _INTS,
    "prefillTargetOngoingRequests": st.one_of(_INTS, _one_of("1024", "1025")),
    "decodeTargetOngoingRequests": st.one_of(_INTS, _one_of("1024", "1025")),
    "prefillUpscaleDelaySeconds": st.one_of(_INTS, _one_of("3600", "3601")),
    "decodeUpscaleDelaySeconds": st.one_of(_INTS, _one_of("3600", "3601")),
    "prefillDownscaleDelaySeconds": st.one_of(_INTS, _one_of("3600", "3601")),
    "decodeDownscaleDelaySeconds": st.one_of(_INTS, _one_of("3600", "3601")),
    "kvBackends": _json_lists(["LIBFABRIC"], ["UCX"], ["LIBFABRIC", "UCX"], [], ["TCP"], "LIBFABRIC"),
    "acceptUcxOnEfaKvTransferIs100xSlower": _BOOLS,
    "extraEngineKwargs": _one_of("{}", '{"max_num_seqs": 64}', "[]", "not json", '{"kv_transfer_config": {}}',
                                 '{"no_such_engine_arg": 1}'),
    "frontDoor": _one_of("internal", "internet-facing", "none", "public", ""),
    "frontDoorAllowedCidrs": _json_lists([], ["10.0.0.0/16"], ["0.0.0.0/0"], ["10.0.0.0/33"], "10.0.0.0/16"),
    "frontDoorCertificateArn": _one_of(
        "", "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab",
        "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab", "not-an-arn"),
    "frontDoorHostname": _one_of("", "llm.example.com", "LLM.Example.com", "llm_team.example", "localhost"),
    "apiKeys": _one_of("", '{"app-team": "' + "k" * 40 + '"}', '{"app-team": "short"}', "not json", "[]",
                       '{"Bad Name": "' + "k" * 40 + '"}'),
    "apiKeyRequestsPerMinute": st.one_of(_INTS, _one_of("600", "0")),
    "apiKeyTokensPerMinute": st.one_of(_INTS, _one_of("1000000", "0")),
    "apiKeyLimits": _one_of("{}", '{"app-team": {"requestsPerMinute": 5}}', '{"app-team": {"tokensPerMinute": 0}}',
                            '{"nobody": {"requestsPerMinute": 5}}', "[]", "not json"),
    "metricsRetention": _one_of("15d", "2w", "1d", "366d", "367d", "0d", "12h", "15", "forever", ""),
    "metricsStorageGiB": _INTS,
    "ttftSloSeconds": _one_of("2.5", "1", "1.0", "0.25", "2", "3", "-1", "abc", ""),
    "tpotSloSeconds": _one_of("0.2", "0.1", "0.15", "0.12", "0", "abc", ""),
    "sloObjective": _one_of("0.99", "0.9", "0.9999", "0.8", "1", "0.99999", "abc", ""),
    "peakRequestsPerSecond": _one_of("0.1", "1", "50", "0", "-1", "nan", "abc", ""),
    "typicalPromptTokens": st.one_of(_INTS, _one_of("1024", "4000")),
    "typicalOutputTokens": st.one_of(_INTS, _one_of("256", "2000")),
    "longPromptTokens": st.one_of(_INTS, _one_of("3072", "100000")),
    "longOutputTokens": st.one_of(_INTS, _one_of("1024", "100000")),
}

# What only GCS fault tolerance registers: the store and the Secret with its token.
GCS_STORE_TYPES = {"eks-pd-llm:gcs:GcsStore", "aws:elasticache/subnetGroup:SubnetGroup",
                   "aws:elasticache/replicationGroup:ReplicationGroup", "kubernetes:core/v1:Secret"}
# What only the front door registers: its component and the load balancer's Service.
FRONT_DOOR_TYPES = {"eks-pd-llm:network:FrontDoor", "kubernetes:core/v1:Service"}

_setting = st.sampled_from(sorted(VALUES)).flatmap(lambda key: st.tuples(st.just(key), VALUES[key]))
CONFIGS = st.tuples(st.sampled_from(STACKS),
                    st.lists(_setting, min_size=1, max_size=3, unique_by=lambda kv: kv[0]).map(dict))


@functools.cache
def declared_settings() -> frozenset[str]:
    config = yaml.safe_load(project_file().read_text())["config"]
    return frozenset(config)


@pytest.fixture(scope="module")
def full_graph() -> dict[str, set[str]]:
    """Resource types each unmodified stack registers: what 'the full graph' means."""
    graphs = {}
    for stack in STACKS:
        run = try_run_offline(stack)
        assert run.error is None, run.error
        graphs[stack] = {r.type for r in run.resources}
    return graphs


def test_every_setting_is_fuzzed():
    assert set(VALUES) == declared_settings()


def check_outcome(stack: str, overrides: dict[str, str], full_graph: dict[str, set[str]]) -> None:
    run = try_run_offline(stack, overrides=overrides)
    if run.error is None:
        missing = full_graph[stack] - {r.type for r in run.resources}
        if not run.program["settings"].serving.gcs_fault_tolerance:  # prod's GCS store, turned off
            missing -= GCS_STORE_TYPES
        if not run.program["settings"].front_door.enabled:  # frontDoor none
            missing -= FRONT_DOOR_TYPES
        assert not missing, f"{overrides}: graph lacks {sorted(missing)}"
        assert run.outputs, f"{overrides}: no stack outputs"
        return
    error = run.error
    assert isinstance(error, ConfigError), f"{overrides}: {type(error).__name__}: {error}"
    assert error.setting in declared_settings(), f"{overrides}: {error.setting!r} is no stack setting: {error}"
    message = str(error)
    assert message.startswith(f"{error.setting}: "), message
    assert error.setting in overrides or any(
        key.split(":")[-1] in message or (len(value) >= 6 and value in message) for key, value in overrides.items()
    ), f"{overrides}: the error names none of the changed settings: {message}"
    partial = [f"{r.type}::{r.name}" for r in run.resources if r.type != STACK_TYPE]
    assert partial == [], f"{overrides}: registered before failing: {partial}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(CONFIGS)
@example(("dev", {"gpuNodeCount": "3"}))                       # valid: a bigger GPU node group
@example(("prod", {"gpuNodeType": "g6.xlarge"}))               # no EFA interface
@example(("dev", {"kvBackends": '["UCX"]'}))                   # UCX on EFA without the acknowledgement
@example(("dev", {"hfToken": "hf_plaintexttoken"}))            # a plaintext secret
@example(("dev", {"visionInputs": "true"}))                    # the encoder leaves fewer blocks than maxNumSeqs
def test_generated_configs_build_the_graph_or_name_the_bad_setting(full_graph, config):
    stack, overrides = config
    check_outcome(stack, overrides, full_graph)


def test_a_dtype_too_big_for_the_gpu_is_named(full_graph):
    # Found by this fuzzing: float32 doubles the weights past the L4's memory, and the error used to
    # blame modelSource without naming the dtype the user had just set.
    check_outcome("dev", {"dtype": "float32"}, full_graph)
    with pytest.raises(ConfigError, match=r"^dtype: got 'float32'; allowed: bfloat16, float16 or auto"):
        run_offline("dev", overrides={"dtype": "float32"})
