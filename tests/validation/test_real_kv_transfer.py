"""vLLM's own `KVTransferConfig` (vllm.config) accepts each phase's kv_transfer_config, gives each
engine the side of the transfer its phase plays, and reads the NIXL backends the way the NIXL
connector reads them — so a config that would silently fall back to UCX on EFA fails here.

Ray Serve LLM does not look at kv_role at all; vLLM is the only validator of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.validation.conftest import DeployedConfig

pytestmark = pytest.mark.validation

PHASES = ("prefill", "decode")
# What vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py uses when the config names
# no backends (0.29.0, as in 0.26.0): UCX, which runs at TCP-like speed over EFA.
NIXL_CONNECTOR_DEFAULT_BACKENDS = ["UCX"]


def kv_transfer_config(**fields: Any):
    from vllm.config import KVTransferConfig

    return KVTransferConfig(**fields)


def _kv_fields(deployed: DeployedConfig, phase: str) -> dict[str, Any]:
    return deployed.pd_app["args"][f"{phase}_config"]["engine_kwargs"]["kv_transfer_config"]


@pytest.fixture(scope="module")
def nixl_plugins() -> list[str]:
    """Backend plugins the installed NIXL (1.3.2, the one vLLM 0.29.0 pins) ships."""
    from nixl._api import nixl_agent, nixl_agent_config

    return nixl_agent("validator-probe", nixl_agent_config(backends=[])).get_plugin_list()


@pytest.mark.parametrize("phase", PHASES)
def test_vllm_accepts_the_kv_transfer_config(deployed: DeployedConfig, phase: str) -> None:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    config = kv_transfer_config(**_kv_fields(deployed, phase))

    assert config.is_kv_transfer_instance
    KVConnectorFactory.get_connector_class(config)  # a connector this vLLM ships


def test_prefill_produces_and_decode_consumes_kv(deployed: DeployedConfig) -> None:
    prefill = kv_transfer_config(**_kv_fields(deployed, "prefill"))
    decode = kv_transfer_config(**_kv_fields(deployed, "decode"))

    assert prefill.is_kv_producer
    assert decode.is_kv_consumer
    assert prefill.engine_id != decode.engine_id
    # No id is rendered: each engine start gets its own, so decode hand-shakes with a restarted prefill.
    assert kv_transfer_config(**_kv_fields(deployed, "prefill")).engine_id != prefill.engine_id


def assert_kv_moves_over_libfabric(fields: dict[str, Any], nixl_plugins: list[str]) -> None:
    """The GPU nodes have EFA: LIBFABRIC is the backend that uses it at full speed. Read the
    backends the way vLLM's NIXL connector reads them, defaults included, and check NIXL has them."""
    backends = kv_transfer_config(**fields).get_from_extra_config("backends", NIXL_CONNECTOR_DEFAULT_BACKENDS)

    assert backends == ["LIBFABRIC"], f"NIXL would run {backends}"
    assert set(backends) <= set(nixl_plugins), f"{backends} not among NIXL's plugins {nixl_plugins}"


@pytest.mark.parametrize("phase", PHASES)
def test_kv_moves_over_libfabric(deployed: DeployedConfig, phase: str, nixl_plugins) -> None:
    assert_kv_moves_over_libfabric(_kv_fields(deployed, phase), nixl_plugins)


# --- Teeth ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kv_role", ["kv_both_ways", "producer", "KV_PRODUCER", None])
def test_vllm_refuses_a_bad_kv_role(dev: DeployedConfig, kv_role) -> None:
    fields = {**_kv_fields(dev, "prefill"), "kv_role": kv_role}

    with pytest.raises(ValueError, match="kv_role"):
        kv_transfer_config(**fields)


def test_vllm_refuses_an_unknown_kv_transfer_field(dev: DeployedConfig) -> None:
    fields = _kv_fields(dev, "decode")
    fields["kv_connector_extra_configs"] = fields.pop("kv_connector_extra_config")

    with pytest.raises(ValueError, match="kv_connector_extra_configs"):
        kv_transfer_config(**fields)


def test_vllm_refuses_an_unknown_connector(dev: DeployedConfig) -> None:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    config = kv_transfer_config(**{**_kv_fields(dev, "prefill"), "kv_connector": "NIXLConnector"})

    with pytest.raises(ValueError, match="NIXLConnector"):
        KVConnectorFactory.get_connector_class(config)


@pytest.mark.parametrize("extra_config", [
    # vLLM accepts any extra-config key: with `backend:` the engine quietly runs its UCX default.
    {"backend": ["LIBFABRIC"]},
    {"backends": ["UCX"]},
    # NIXL plugin names are case-sensitive: this one fails only when the engine starts.
    {"backends": ["libfabric"]},
], ids=["misspelled-key", "ucx", "lowercase"])
def test_kv_not_over_libfabric_is_caught(dev: DeployedConfig, extra_config, nixl_plugins) -> None:
    fields = {**_kv_fields(dev, "prefill"), "kv_connector_extra_config": extra_config}

    with pytest.raises(AssertionError):
        assert_kv_moves_over_libfabric(fields, nixl_plugins)
