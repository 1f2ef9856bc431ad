"""`singleProcessEngine` as the stack registers it (offline, Pulumi's mocks): off, the RayService is as
before; on, Ray Serve LLM is told to build the stack's engine (the app's runtime_env) and every Ray pod
mounts the code that defines it and can import it from there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from offline import run_offline, try_run_offline
from serve_app.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
ENGINE_CLASS_PATH = "front_door.engine:SingleProcessVLLMEngine"
RAY_SERVICE = ("kubernetes:ray.io/v1:RayService", "inference-rayservice")
CODE = ("kubernetes:core/v1:ConfigMap", "inference-front-door")


def one(run, type_: str, name: str):
    [found] = [r for r in run.resources if r.type == type_ and r.name == name]
    return found


def application(run) -> dict:
    return yaml.safe_load(one(run, *RAY_SERVICE).inputs["spec"]["serveConfigV2"])["applications"][0]


def ray_pods(run) -> list[dict]:
    cluster = one(run, *RAY_SERVICE).inputs["spec"]["rayClusterConfig"]
    return [group["template"]["spec"] for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"])]


@pytest.fixture(scope="module")
def single_process():
    # No front door: the setting alone must ship the code (the keyed ingress ships it too).
    return run_offline("dev", overrides={"singleProcessEngine": "true", "frontDoor": "none"})


def test_off_by_default_the_engine_is_ray_serve_llms_and_nothing_is_mounted():
    run = run_offline("dev", overrides={"frontDoor": "none"})
    assert "RAYLLM_VLLM_ENGINE_CLS" not in str(application(run))
    assert not [r for r in run.resources if r.name == CODE[1]]
    for pod in ray_pods(run):
        assert not any("front-door" in volume["name"] for volume in pod.get("volumes", []))


def test_on_ray_serve_llm_builds_the_stacks_engine_for_every_replica(single_process):
    assert application(single_process)["runtime_env"] == {"env_vars": {"RAYLLM_VLLM_ENGINE_CLS": ENGINE_CLASS_PATH}}


def test_on_every_ray_pod_can_import_the_engine_the_app_names_from_what_it_mounts(single_process, tmp_path):
    code = one(single_process, *CODE).inputs["data"]
    assert code["engine.py"] == (REPO / "front_door" / "engine.py").read_text()
    for pod in ray_pods(single_process):
        [container] = pod["containers"]
        [mount] = [m for m in container["volumeMounts"] if m["name"] == "front-door-code"]
        [volume] = [v for v in pod["volumes"] if v["name"] == "front-door-code"]
        assert {"name": "PYTHONPATH", "value": mount["mountPath"]} in container["env"]
        assert not [v for v in pod["volumes"] if v["name"] == "api-keys"]  # no keys asked for, none mounted
    # The pod's view of the mount, then the import Ray Serve LLM does with the name the app carries.
    root = tmp_path / mount["mountPath"].lstrip("/")
    for item in volume["configMap"]["items"]:
        (root / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (root / item["path"]).write_text(code[item["key"]])
    named = application(single_process)["runtime_env"]["env_vars"]["RAYLLM_VLLM_ENGINE_CLS"]
    imported = subprocess.run(
        [sys.executable, "-c", "import sys; from ray._common.utils import import_attr; cls = import_attr(sys.argv[1]); "
         "print(cls.__module__, cls.__mro__[1].__name__, sys.modules[cls.__module__].__file__)", named],
        cwd=tmp_path, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr[-2000:]
    module, parent, source = imported.stdout.splitlines()[-1].split()
    assert (module, parent, source) == ("front_door.engine", "VLLMEngine", str(root / "front_door" / "engine.py"))


def test_a_value_that_is_not_a_boolean_is_refused_naming_the_setting():
    run = try_run_offline("dev", overrides={"singleProcessEngine": "sometimes"})
    assert isinstance(run.error, ConfigError)
    assert run.error.setting == "singleProcessEngine"
