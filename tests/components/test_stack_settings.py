"""Stack configuration: Pulumi.yaml declares every key, the stack files mean what they say, and every
mistake is refused with a ConfigError naming the key — before any resource (EC2 answers recorded, no AWS)."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from components.config.cluster import SUPPORTED_KUBERNETES_VERSIONS
from components.config.declared import declared_keys, project_name
from components.config.network import NetworkSettings
from components.config.nodes import GpuNodeSettings
from components.config.read import read_config
from components.config.stack import StackSettings, settings_from_config
from components.config.zones import plan_availability_zones
from components.discovery import CloudFacts, Zone
from facts.images import DLC_TAG, PUBLIC_DLC_REPOSITORY, RAY_LLM_DLC_V1_0, serving_stack
from offline import ask_recorded_cloud, stack_config
from serve_app.errors import ConfigError
from serve_app.stack_keys import from_stack_keys

PROJECT = project_name()


def settings_for(stack: str, **overrides: str) -> StackSettings:
    """What the program gets for `stack` (defaults + stack file, as the CLI merges them) + overrides."""
    raw, _secret_keys = stack_config(stack)
    raw.update(overrides)
    return settings_from_config(raw, project=PROJECT, stack=stack, ask_cloud=ask_recorded_cloud)


def refusal(key: str, value: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        settings_for("dev", **{key: value})
    return caught.value


# ── Pulumi.yaml ───────────────────────────────────────────────────────────────────────────────

def test_every_project_key_has_type_default_and_description():
    for name, key in declared_keys().items():
        if ":" in name:  # provider keys may only carry a value in Pulumi.yaml
            assert key.default is not None, name
            continue
        assert key.type in ("string", "integer", "boolean", "array"), name
        assert key.default is not None, f"{name} has no default"
        assert len(key.description) > 20, f"{name} is not described"


# A different valid value for every key: each must change what the program gets.
ALTERNATIVES = {
    "aws:region": "us-east-1",
    "clusterName": "other-cluster",
    "kubernetesVersion": "1.34",
    "namespace": "llm",
    "vpcCidr": "172.16.0.0/16",
    "azCount": "3",
    "natMode": "perAz",
    "systemNodeType": "m7i.2xlarge",
    "systemNodeCount": "2",
    "gpuNodeType": "g6.12xlarge",
    "gpuNodeCount": "3",
    "gpuNodeMaxCount": "5",
    "gpuAvailabilityZone": "us-west-2c",
    "gpuDiskGiB": "500",
    "gpuImageSnapshotId": "snap-0123456789abcdef0",
    "prefillGpuNodeType": "g6.12xlarge",
    "prefillGpuNodeCount": "2",
    "prefillGpuNodeMaxCount": "3",
    "decodeGpuNodeType": "g6.16xlarge",
    "decodeGpuNodeCount": "2",
    "decodeGpuNodeMaxCount": "3",
    "kuberayChartVersion": "1.6.1",
    "nvidiaDevicePluginChartVersion": "0.19.3",
    "efaDevicePluginChartVersion": "v0.5.29",
    "kubePrometheusStackChartVersion": "88.5.2",
    "dcgmExporterChartVersion": "4.8.1",
    "metricsRetention": "2w",
    "metricsStorageGiB": "100",
    "ttftSloSeconds": "1",
    "tpotSloSeconds": "0.1",
    "sloObjective": "0.995",
    "peakRequestsPerSecond": "0.05",
    "typicalPromptTokens": "512",
    "typicalOutputTokens": "128",
    "longPromptTokens": "2048",
    "longOutputTokens": "512",
    "clusterAutoscalerChartVersion": "9.58.0",
    "adminPrincipalArns": '["arn:aws:iam::111122223333:role/admin"]',
    "apiPublicAccessCidrs": '["198.51.100.0/24"]',
    "deletionProtection": "true",
    "deployFromInsideVpc": "true",
    "iamPermissionsBoundaryArn": "arn:aws:iam::111122223333:policy/eks-pd-llm/workload-boundary",
    "gcsFaultTolerance": "true",
    "httpFront": "haproxy",
    "hfToken": "hf_abc",
    "rayServiceName": "other-llm",
    "rayImage": "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0",
    "rayVersion": "2.60.0",
    "initializingTimeout": "45m",
    "upgradeStrategy": "NewCluster",
    "singleProcessEngine": "true",
    "rayImageCarriesRunaiStreamer": "true",
    "compileCacheInS3": "true",
    "modelId": "my-model",
    "modelSource": "acme/custom-model-7b",
    "tokenizerSource": "Qwen/Qwen3.5-9B",
    "maxModelLen": "2048",
    "dtype": "float16",
    "quantization": "fp8",
    "gpuMemoryUtilization": "0.95",
    "enforceEager": "true",
    "cudaGraphMaxBatchSize": "16",
    "maxNumSeqs": "16",
    "maxNumBatchedTokens": "4096",
    "visionInputs": "true",
    "kvCacheFromPlan": "false",
    "streamBatchingIntervalMs": "5",
    "pdDirectStreaming": "true",
    "tensorParallelSize": "2",
    "pipelineParallelSize": "2",
    "prefillReplicas": "2",
    "prefillMaxReplicas": "3",
    "decodeReplicas": "2",
    "decodeMaxReplicas": "3",
    "prefillTargetOngoingRequests": "4",
    "decodeTargetOngoingRequests": "32",
    "prefillUpscaleDelaySeconds": "15",
    "decodeUpscaleDelaySeconds": "15",
    "prefillDownscaleDelaySeconds": "300",
    "decodeDownscaleDelaySeconds": "300",
    "kvBackends": '["LIBFABRIC", "UCX"]',
    "acceptUcxOnEfaKvTransferIs100xSlower": "true",
    "extraEngineKwargs": '{"max_logprobs": 8}',
    "frontDoor": "none",
    "frontDoorAllowedCidrs": '["10.0.0.0/24"]',
    "frontDoorCertificateArn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab",
    "frontDoorHostname": "llm.example.com",
    "apiKeys": '{"app-team": "' + "k" * 40 + '"}',
    "apiKeyRequestsPerMinute": "60",
    "apiKeyTokensPerMinute": "5000",
    "apiKeyLimits": '{"app-team": {"requestsPerMinute": 5}}',
}
# Keys that only make sense together with another change.
COMPANIONS = {
    "rayVersion": {"rayImage": "example.com/ray:2.60.0-gpu", "rayVersion": "2.59.0"},
    "kvBackends": {"acceptUcxOnEfaKvTransferIs100xSlower": "true"},
    "pdDirectStreaming": {"httpFront": "haproxy", "frontDoor": "none"},
    "apiKeyLimits": {"apiKeys": '{"app-team": "' + "k" * 40 + '"}'},
    # With a certificate, clients call a name it covers.
    "frontDoorCertificateArn": {"frontDoorHostname": "llm.example.com"},
    "tensorParallelSize": {"gpuNodeType": "g6.12xlarge", "modelSource": "acme/custom-model-7b"},
    "pipelineParallelSize": {"gpuNodeType": "g6.12xlarge", "modelSource": "acme/custom-model-7b"},
    "prefillReplicas": {"gpuNodeCount": "4"},
    "decodeReplicas": {"gpuNodeCount": "4"},
    "prefillMaxReplicas": {"gpuNodeCount": "4"},
    "decodeMaxReplicas": {"gpuNodeCount": "4"},
    # A second cluster's two GPU nodes beside the serving ones.
    "upgradeStrategy": {"gpuNodeMaxCount": "4"},
    "acceptUcxOnEfaKvTransferIs100xSlower": {"kvBackends": '["UCX"]'},
    "prefillGpuNodeCount": {"prefillGpuNodeType": "g6.8xlarge"},
    "prefillGpuNodeMaxCount": {"prefillGpuNodeType": "g6.8xlarge"},
    "decodeGpuNodeCount": {"decodeGpuNodeType": "g6.8xlarge"},
    "decodeGpuNodeMaxCount": {"decodeGpuNodeType": "g6.8xlarge"},
    # The vision encoder leaves an L4 16 KV blocks: CUDA graphs of 32 sequences would not start.
    "visionInputs": {"enforceEager": "true"},
    "maxModelLen": {"longPromptTokens": "1024"},  # the long request must fit it
    # A KV cache fixed at 0.95 of an L4 would not fit a new node's first start (refused).
    "gpuMemoryUtilization": {"kvCacheFromPlan": "false"},
    "compileCacheInS3": {"modelSource": "s3://acme-models/mirror/Qwen/Qwen3.5-9B",
                         "rayImageCarriesRunaiStreamer": "true"},
}


def test_alternatives_cover_every_declared_key():
    assert set(ALTERNATIVES) == set(declared_keys())


@pytest.mark.parametrize("key", sorted(ALTERNATIVES))
def test_every_key_is_read(key):
    """Changing any one key (with what it needs beside it) changes what the program gets."""
    base_overrides = COMPANIONS.get(key, {})
    changed = {**base_overrides, key: ALTERNATIVES[key]}
    if key == "acceptUcxOnEfaKvTransferIs100xSlower":
        # Without the acknowledgement UCX on EFA is refused; with it, it is accepted.
        with pytest.raises(ConfigError):
            settings_for("dev", **base_overrides)
        assert settings_for("dev", **changed).serving.app.config.kv_transfer.backends == ("UCX",)
        return
    assert settings_for("dev", **changed) != settings_for("dev", **base_overrides)


# ── The two stacks ────────────────────────────────────────────────────────────────────────────

def test_dev_reproduces_the_reference_deployment():
    s = settings_for("dev")
    assert s.region == "us-west-2"
    assert s.cluster.name == "ray-llm-multinode"
    assert s.cluster.kubernetes_version == "1.35"
    assert s.namespace == "inference"
    assert (s.system_nodes.instance_type, s.system_nodes.count) == ("m7i.xlarge", 1)
    assert (s.gpu_nodes.instance_type, s.gpu_nodes.count) == ("g6.8xlarge", 2)
    assert s.gpu_nodes.availability_zone is None  # picked among the AZs offering the type
    assert s.gpu_nodes.disk_gib == 200
    assert s.charts.kuberay == "1.7.0"
    assert s.serving.name == "ray-llm"
    assert s.serving.app.config.model.model_source == "Qwen/Qwen3.5-9B"
    assert s.serving.app.config.model.model_id == "qwen3.5-9b"
    assert s.serving.app.config.kv_transfer.backends == ("LIBFABRIC",)
    assert s.serving.image == "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0"
    assert (s.network.nat_mode, s.network.az_count, s.network.protect) == ("single", 2, False)
    assert not s.hf_token_configured


def test_prod_differs_where_production_should():
    dev, prod = settings_for("dev"), settings_for("prod")
    assert prod.cluster.protect and prod.network.protect and not dev.cluster.protect
    assert (prod.network.nat_mode, dev.network.nat_mode) == ("perAz", "single")
    assert prod.network.az_count > dev.network.az_count
    assert prod.cluster.api_public_access_cidrs and "0.0.0.0/0" not in prod.cluster.api_public_access_cidrs
    documentation = ipaddress.IPv4Network("203.0.113.0/24")  # RFC 5737 (commented in the file)
    assert all(ipaddress.IPv4Network(c).subnet_of(documentation) for c in prod.cluster.api_public_access_cidrs)
    assert prod.cluster.admin_principal_arns
    assert prod.system_nodes.count > dev.system_nodes.count
    assert prod.network.vpc_cidr != dev.network.vpc_cidr


def test_settings_are_frozen():
    s = settings_for("dev")
    with pytest.raises(ValidationError):
        s.gpu_nodes.count = 3  # type: ignore[misc]


# ── Refusals ──────────────────────────────────────────────────────────────────────────────────

BAD = [
    ("aws:region", "oregon"),
    ("clusterName", "Ray_LLM"),
    ("clusterName", "a" * 41),
    ("clusterName", "1cluster"),
    ("kubernetesVersion", "1.20"),
    ("kubernetesVersion", "latest"),
    ("namespace", "Inference"),
    ("namespace", "kube-system"),
    ("vpcCidr", "10.0.0.1/16"),
    ("vpcCidr", "8.8.0.0/16"),
    ("vpcCidr", "10.0.0.0/24"),
    ("vpcCidr", "10.0.0.0/12"),
    ("vpcCidr", "not-a-cidr"),
    ("azCount", "1"),
    ("azCount", "7"),
    ("azCount", "two"),
    ("natMode", "perZone"),
    ("systemNodeType", "m7i.large"),
    ("systemNodeType", "t3.nano"),
    ("systemNodeCount", "0"),
    ("systemNodeCount", "11"),
    ("gpuNodeType", "g6.4xlarge"),
    ("gpuNodeType", "m7i.xlarge"),
    ("gpuNodeType", "g6.8xl"),
    ("gpuNodeCount", "0"),
    ("gpuNodeCount", "65"),
    ("gpuNodeCount", "2.5"),
    ("gpuAvailabilityZone", "us-east-1a"),
    ("gpuAvailabilityZone", "west"),
    ("gpuDiskGiB", "20"),
    ("kuberayChartVersion", "latest"),
    ("kuberayChartVersion", "1.7"),
    ("nvidiaDevicePluginChartVersion", ">=0.17"),
    ("efaDevicePluginChartVersion", ""),
    ("adminPrincipalArns", '["arn:aws:sts::123456789012:assumed-role/admin/session"]'),
    ("adminPrincipalArns", '["arn:aws:iam::12345:role/admin"]'),
    ("adminPrincipalArns", "arn:aws:iam::123456789012:role/admin"),
    ("adminPrincipalArns", "[1]"),
    ("apiPublicAccessCidrs", '["10.0.0.1/8"]'),
    ("apiPublicAccessCidrs", '["banana"]'),
    ("apiPublicAccessCidrs", "0.0.0.0/0"),
    ("deletionProtection", "yes"),
    ("iamPermissionsBoundaryArn", "arn:aws:iam::aws:policy/AdministratorAccess"),  # AWS managed: not a boundary we made
    ("iamPermissionsBoundaryArn", "arn:aws:iam::111122223333:role/boundary"),
    ("rayServiceName", "a" * 48),
    ("rayServiceName", "Ray-LLM"),
    ("initializingTimeout", "5m"),
    ("initializingTimeout", "soon"),
    ("upgradeStrategy", "BlueGreen"),
    ("rayImage", "example.com/ray:latest"),
    ("kvBackends", '["UCX"]'),
    ("maxModelLen", "zero"),
    ("httpFront", "nginx"),
    ("pdDirectStreaming", "yes"),
]


@pytest.mark.parametrize(("key", "value"), BAD, ids=[f"{k}={v[:20]}" for k, v in BAD])
def test_bad_value_is_refused_naming_the_key(key, value):
    error = refusal(key, value)
    assert error.setting == key
    assert str(error).startswith(f"{key}: got ")
    assert error.allowed  # says what is allowed


def test_error_shows_the_value_and_what_is_allowed():
    error = refusal("natMode", "perZone")
    assert "'perZone'" in str(error) and "single or perAz" in str(error)


def test_an_unknown_http_front_is_refused_naming_both_fronts():
    error = refusal("httpFront", "nginx")
    assert str(error).startswith("httpFront: got 'nginx'; allowed: serve-proxy or haproxy")


@pytest.mark.parametrize("front", [{}, {"httpFront": "serve-proxy"}])
def test_direct_streaming_without_haproxy_is_refused_before_any_resource(front):
    # Ray Serve would build the app and fail it on the cluster: "ingress_request_router requires HAProxy".
    with pytest.raises(ConfigError) as caught:
        settings_for("dev", pdDirectStreaming="true", **front)
    error = caught.value
    assert error.setting == "pdDirectStreaming" and error.value is True
    assert error.allowed == 'false, or httpFront "haproxy"'
    assert "HAProxy" in str(error) and "\n" not in str(error)


def test_haproxy_and_direct_streaming_together_are_accepted_and_off_by_default():
    default = settings_for("dev").serving
    assert default.http_front == "serve-proxy" and not default.app.config.direct_streaming
    both = settings_for("dev", httpFront="haproxy", pdDirectStreaming="true", frontDoor="none").serving
    assert both.http_front == "haproxy" and both.app.config.direct_streaming


def test_direct_streaming_with_a_front_door_is_refused_naming_the_door():
    # Decode becomes the ingress: no OpenAI ingress is left to check keys (docs/FRONT_DOOR.md).
    with pytest.raises(ConfigError) as caught:
        settings_for("dev", httpFront="haproxy", pdDirectStreaming="true")
    assert caught.value.setting == "frontDoor" and "pdDirectStreaming false" in caught.value.allowed


@pytest.mark.parametrize(("switch", "named"), [
    ({"httpFront": "haproxy"}, "httpFront"),
    ({"httpFront": "haproxy", "pdDirectStreaming": "true"}, "pdDirectStreaming"),
])
def test_a_ray_older_than_the_switches_is_refused_naming_the_switch(switch, named):
    old_ray = {"rayImage": "example.com/ray:2.57.0-gpu", "rayVersion": "2.57.0"}
    with pytest.raises(ConfigError) as caught:
        settings_for("dev", **old_ray, **switch)
    assert caught.value.setting == "rayVersion"
    assert "2.58.0 or newer" in caught.value.allowed and named in str(caught.value)


@pytest.mark.parametrize("key", ["gpuNodeTyp", "eks-pd-llm:gpuNodeTyp"])
def test_unknown_key_is_refused_with_a_suggestion(key):
    error = refusal(key, "g6.8xlarge")
    assert error.setting == "gpuNodeTyp"
    # The hint first, and short: not the list of every setting.
    assert str(error) == "unknown setting `gpuNodeTyp`: did you mean `gpuNodeType`?"


def test_other_providers_keys_are_theirs():
    settings_for("dev", **{"aws:profile": "work", "kubernetes:context": "x"})


def test_gpu_type_without_efa_says_why():
    error = refusal("gpuNodeType", "g6.4xlarge")
    assert error.why == "EC2 says it does not support EFA; prefill/decode KV transfer needs it"
    assert "NVIDIA GPUs and EFA support" in error.allowed


def test_defaults_apply_when_raw_config_is_partial():
    s = settings_from_config({"aws:region": "us-east-2", "apiPublicAccessCidrs": '["0.0.0.0/0"]'}, project=PROJECT,
                             stack="x", ask_cloud=ask_recorded_cloud)
    assert s.region == "us-east-2" and s.gpu_nodes.instance_type == "g6.8xlarge"


def test_supported_kubernetes_versions_include_the_reference():
    assert "1.35" in SUPPORTED_KUBERNETES_VERSIONS


# ── Subnet layout ─────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("prefix", [16, 18, 20])
@pytest.mark.parametrize("az_count", [2, 3, 6])
def test_subnets_fit_the_vpc_without_overlap(prefix, az_count):
    # us-east-1: the (recorded) region with 6 AZs.
    s = settings_for("dev", vpcCidr=f"10.0.0.0/{prefix}", azCount=str(az_count), **{"aws:region": "us-east-1"})
    pairs = s.zones.subnet_cidrs
    subnets = [net for pair in pairs for net in (pair.private, pair.public)]
    assert len(pairs) == az_count
    assert all(net.subnet_of(s.network.vpc_cidr) for net in subnets)
    assert all(not a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1:])
    # Pods take VPC addresses: private subnets are the big ones.
    assert all(pair.private.num_addresses == 8 * pair.public.num_addresses for pair in pairs)
    # Each zone's slot is its zone ID's number.
    for zone, pair in zip(s.zones.network_zones, pairs, strict=True):
        slot = int(zone.zone_id.rsplit("az", 1)[1]) - 1
        assert pair.private == list(s.network.vpc_cidr.subnets(prefixlen_diff=3))[slot]


# ── AZ choice (by zone ID, from EC2's answer) ─────────────────────────────────────────────────

# Names map to IDs differently in every account: here us-west-2a is usw2-az3 and d is az1.
ZONES = (Zone("us-west-2a", "usw2-az3"), Zone("us-west-2b", "usw2-az2"), Zone("us-west-2c", "usw2-az4"),
         Zone("us-west-2d", "usw2-az1"))


def cloud(zones=ZONES, offering=("us-west-2c", "us-west-2b"), region="us-west-2") -> CloudFacts:
    g6 = settings_for("dev").serving.gpu_instance
    return CloudFacts(region=region, zones=tuple(zones), zones_offering_gpu=frozenset(offering), gpu_instance=g6,
                      system_instance=g6, account_id="210987654321")


def network(az_count: int) -> NetworkSettings:
    typed, texts = read_config({"azCount": str(az_count)}, project=PROJECT)
    return from_stack_keys(NetworkSettings, typed, texts)


def gpu(**overrides: str) -> GpuNodeSettings:
    typed, texts = read_config(overrides, project=PROJECT)
    return from_stack_keys(GpuNodeSettings, typed, texts)


def test_auto_gpu_zone_is_the_first_offering_one_by_zone_id_and_leads_the_network():
    plan = plan_availability_zones(network(3), gpu(), cloud())
    assert plan.gpu_zone == Zone("us-west-2b", "usw2-az2")  # az2 offers it, az1 (us-west-2d) does not
    assert [z.zone_id for z in plan.network_zones] == ["usw2-az2", "usw2-az1", "usw2-az3"]
    assert plan.control_plane_zones == plan.network_zones


@pytest.mark.parametrize("wanted", ["us-west-2c", "usw2-az4"])
def test_configured_gpu_zone_is_used_by_name_or_by_id(wanted):
    plan = plan_availability_zones(network(2), gpu(gpuAvailabilityZone=wanted), cloud())
    assert plan.gpu_zone == Zone("us-west-2c", "usw2-az4") and plan.network_zones[0] == plan.gpu_zone


def test_configured_gpu_zone_without_the_type_is_refused():
    with pytest.raises(ConfigError) as caught:
        plan_availability_zones(network(2), gpu(gpuAvailabilityZone="us-west-2a"), cloud(offering=("us-west-2b",)))
    assert caught.value.setting == "gpuAvailabilityZone"
    assert caught.value.allowed == "us-west-2b (usw2-az2)"


def test_gpu_type_offered_nowhere_is_refused():
    with pytest.raises(ConfigError) as caught:
        plan_availability_zones(network(2), gpu(), cloud(offering=()))
    assert caught.value.setting == "gpuNodeType"


def test_more_azs_than_the_region_has_is_refused():
    with pytest.raises(ConfigError) as caught:
        plan_availability_zones(network(5), gpu(), cloud())
    assert caught.value.setting == "azCount"


US_EAST_1 = (Zone("us-east-1a", "use1-az4"), Zone("us-east-1b", "use1-az3"), Zone("us-east-1c", "use1-az1"))


def test_the_control_plane_never_gets_an_az_eks_refuses_but_the_gpu_nodes_may():
    # use1-az3 is the only AZ offering the GPU type: the GPU node group goes there, the control
    # plane takes the other AZs' subnets, so the VPC needs three AZs.
    only_az3 = cloud(US_EAST_1, offering=("us-east-1b",), region="us-east-1")
    with pytest.raises(ConfigError) as caught:
        plan_availability_zones(network(2), gpu(**{"aws:region": "us-east-1"}), only_az3)
    assert caught.value.setting == "azCount" and "us-east-1b (use1-az3)" in str(caught.value)
    plan = plan_availability_zones(network(3), gpu(**{"aws:region": "us-east-1"}), only_az3)
    assert plan.gpu_zone.zone_id == "use1-az3"
    assert [z.zone_id for z in plan.control_plane_zones] == ["use1-az1", "use1-az4"]


def test_an_az_eks_refuses_is_the_last_one_the_network_takes():
    plan = plan_availability_zones(network(2), gpu(**{"aws:region": "us-east-1"}),
                                   cloud(US_EAST_1, offering=("us-east-1a",), region="us-east-1"))
    assert [z.zone_id for z in plan.network_zones] == ["use1-az4", "use1-az1"]  # az3 skipped although lower


# ── Ray image ↔ rayVersion ───────────────────────────────────────────────────────────────────

def test_default_image_is_the_regional_dlc_with_its_ray_version():
    serving = settings_for("dev", **{"aws:region": "eu-west-1"}).serving
    assert serving.image == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/ray:serve-llm-cuda-v1.0"
    assert serving.ray_version == "2.58.0"
    stack = serving_stack(serving.image)
    assert stack == RAY_LLM_DLC_V1_0
    assert (stack.vllm, stack.nixl, stack.torch) == ("0.26.0", "1.3.1", "2.11.0")


def test_public_copy_of_the_dlc_is_known():
    assert serving_stack(f"{PUBLIC_DLC_REPOSITORY}:{DLC_TAG}") == RAY_LLM_DLC_V1_0
    assert settings_for("dev", rayImage=f"{PUBLIC_DLC_REPOSITORY}:{DLC_TAG}").serving.ray_version == "2.58.0"


def test_matching_ray_version_is_accepted_and_a_different_one_refused():
    assert settings_for("dev", rayVersion="2.58.0").serving.ray_version == "2.58.0"
    with pytest.raises(ConfigError, match=r"rayVersion: got '2.60.0'; allowed: 2.58.0"):
        settings_for("dev", rayVersion="2.60.0")


def test_unknown_image_needs_ray_version():
    mine = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-ray:2.60.0-vllm0.29"
    assert refusal("rayImage", mine).setting == "rayVersion"
    serving = settings_for("dev", rayImage=mine, rayVersion="2.60.0").serving
    assert (serving.image, serving.ray_version, serving_stack(mine)) == (mine, "2.60.0", None)


@pytest.mark.parametrize("image", [
    "rayproject/ray-llm:latest",
    "rayproject/ray-llm",
    "localhost:5000/ray",
    f"{PUBLIC_DLC_REPOSITORY}:serve-llm-cuda",
])
def test_unpinned_images_are_refused(image):
    with pytest.raises(ConfigError) as raised:
        settings_for("dev", rayImage=image, rayVersion="2.58.0")
    assert raised.value.setting == "rayImage"


def test_digest_pins_an_image():
    image = "rayproject/ray-llm@sha256:" + "a" * 64
    assert settings_for("dev", rayImage=image, rayVersion="2.60.0").serving.ray_version == "2.60.0"


# ── Stack files read strictly ────────────────────────────────────────────────────────────────

def test_a_typo_in_the_aws_namespace_is_refused_with_the_key_it_meant():
    error = refusal("aws:regoin", "us-west-2")
    assert error.setting == "aws:regoin" and str(error) == "unknown setting `aws:regoin`: did you mean `aws:region`?"
    # A key the AWS provider does read passes through to it.
    assert settings_for("dev", **{"aws:profile": "ops", "aws:skipMetadataApiCheck": "false"}).region == "us-west-2"


def test_the_aws_keys_come_from_the_installed_provider_sdk():
    from components.config.read import provider_config_keys

    keys = provider_config_keys("pulumi_aws")
    assert {"region", "profile", "assumeRoles", "defaultTags", "skipRegionValidation"} <= keys
    assert "regoin" not in keys and len(keys) > 25


def test_a_version_yaml_turned_into_a_number_gets_a_hint_to_quote_it():
    # `kubernetesVersion: 1.30` unquoted reaches the program as "1.3".
    error = refusal("kubernetesVersion", "1.3")
    assert 'quote it ("1.30")' in str(error)
    assert "quote" not in str(refusal("kubernetesVersion", "1.36"))


# ── No silent private endpoint; placeholders refused by a real preview ──────────────────────

def test_an_empty_api_cidr_list_is_refused_unless_the_deploy_runs_inside_the_vpc():
    error = refusal("apiPublicAccessCidrs", "[]")
    assert error.setting == "apiPublicAccessCidrs" and "deployFromInsideVpc: true" in error.allowed
    private = settings_for("dev", apiPublicAccessCidrs="[]", deployFromInsideVpc="true")
    assert private.cluster.endpoint_public_access is False


def real_account(stack: str, **overrides: str) -> StackSettings:
    """Settings as a preview on a real account (not the offline mock cloud's) would judge them."""
    from offline.mock_cloud import CloudMocks

    raw, _ = stack_config(stack)
    raw.update(overrides)
    return settings_from_config(raw, project=PROJECT, stack=stack, ask_cloud=lambda query: ask_recorded_cloud(
        query, mocks=CloudMocks(query.region, account_id="210987654321")))


def test_prods_placeholders_pass_offline_and_are_refused_on_a_real_account():
    assert settings_for("prod").cluster.api_public_access_cidrs == ("203.0.113.0/24",)  # offline
    with pytest.raises(ConfigError) as caught:
        real_account("prod")
    assert caught.value.setting == "apiPublicAccessCidrs" and "RFC 5737" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        real_account("prod", apiPublicAccessCidrs='["198.18.4.0/24"]')
    assert caught.value.setting == "adminPrincipalArns" and "111122223333" in str(caught.value)
    filled_in = real_account("prod", apiPublicAccessCidrs='["198.18.4.0/24"]',
                             adminPrincipalArns='["arn:aws:iam::210987654321:role/platform-admin"]')
    assert filled_in.cluster.api_public_access_cidrs == ("198.18.4.0/24",)
    # 0.0.0.0/0 contains the documentation ranges and is no placeholder (the policy pack judges it).
    assert real_account("dev").cluster.api_public_access_cidrs == ("0.0.0.0/0",)
