"""The validators this tier ran are the ones the team decided on, for the image the stacks deploy.

Why this test exists: the tier proves a serveConfigV2 against Ray Serve LLM 2.60.0 / vLLM 0.29.0,
while the stacks deploy the Ray LLM DLC image with Ray 2.58.0 / vLLM 0.26.0. That gap is a
decision, not an accident (facts/validators.py says why: the DLC image carries the EFA stack —
libfabric efa provider, aws-ofi-nccl, NIXL cu13 — and Ray 2.58 would cost CI a multi-GB torch 2.11
install per run; the shape is validated with 2.60 here, and the rendered config ran on the image's
Ray 2.58 / vLLM 0.26 / NIXL 1.3.1 packages in the GPU lab). A decision like that rots silently when
one side moves: someone bumps the image, switches `rayImage`, or a venv rebuild resolves another
vLLM, and the tier keeps passing while it validates against a Ray the cluster never runs.

So this fails when:
- the installed ray/vllm/nixl are not the pinned validator versions (facts.validators.VALIDATOR);
- the image a stack deploys has no accepted pairing with the validator, or its Ray/vLLM differ from
  what that pairing was decided for;
- the RayService's rayVersion is not the Ray inside that image.
The fix is never to loosen this test: re-decide, and record the new pairing and its reason in
facts/validators.py.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

import pytest

from facts.images import serving_stack
from facts.validators import VALIDATOR, accepted_pairing

if TYPE_CHECKING:
    from tests.validation.conftest import DeployedConfig

pytestmark = pytest.mark.validation


def test_the_installed_validators_are_the_pinned_ones() -> None:
    import ray
    import vllm

    installed = {"ray": ray.__version__, "vllm": vllm.__version__, "nixl": version("nixl"),
                 "torch": version("torch").split("+")[0]}
    pinned = {"ray": VALIDATOR.ray, "vllm": VALIDATOR.vllm, "nixl": VALIDATOR.nixl, "torch": VALIDATOR.torch}

    assert installed == pinned


def test_the_deployed_image_is_paired_with_this_validator(deployed: DeployedConfig) -> None:
    image = serving_stack(deployed.image)
    assert image is not None, f"{deployed.image}: no facts for this image in facts/images.py, so no decided pairing"
    pairing = accepted_pairing(image.ray)

    assert pairing is not None, (
        f"image Ray {image.ray} has no accepted pairing with validator Ray {VALIDATOR.ray} in facts/validators.py")
    assert pairing.image == image
    assert pairing.validator == VALIDATOR
    assert pairing.reason and pairing.proven_on_image_by


def test_the_rayservice_declares_the_ray_inside_its_image(deployed: DeployedConfig) -> None:
    image = serving_stack(deployed.image)
    assert image is not None

    assert deployed.ray_service["spec"]["rayClusterConfig"]["rayVersion"] == image.ray
    workers = deployed.ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert {container["image"] for group in workers for container in group["template"]["spec"]["containers"]} == {
        deployed.image}
