"""Fixtures and test data more than one test folder needs.

- `settings_for(stack, **overrides)`: what the Pulumi program gets for a stack (Pulumi.yaml defaults
  + the stack file, as the CLI merges them) with keys overridden, validated by the program's own
  `settings_from_config`.
- `offline_run(stack)`: the real program run offline for a stack (cached for the session: runs are
  deterministic and read-only for tests).
- `ray_service_crd_validator`: KubeRay 1.7.0's RayService CRD as the API server applies it
  (test data in tests/data/kuberay-v1.7.0, see its README).
- `real_exposition` / `real_metric_names`: the samples (and their names) of the real exposition of
  the PD app captured on a GPU (`REAL_METRICS_EXPOSITION`, the one place that says which capture).
- `promtool`: Debian's promtool (package `prometheus`); a missing one fails, never skips.
- `serve_http(server)`: a local HTTP server (a test's stand-in for an API) served until the test ends.
- `server`: an OpenAI-compatible endpoint on 127.0.0.1 (stdlib HTTP, streaming SSE) whose first token
  comes TTFT after a request and each next one ITL later, recording what it was sent.
- `on_controlled_clock(coroutine)`: runs a coroutine on an event loop whose clock starts at 0 and moves
  only when every task waits (looptime): delays a test scripts are then timed exactly.
- `tiny_tokenizer`: a byte-level BPE tokenizer trained here, saved as a transformers tokenizer directory.
- `hf_cache`: a Hugging Face cache of the test's own (HF_HOME in tmp_path, HF_HUB_OFFLINE=1), to which a
  test adds a model's config.json and safetensors index; `read_model_facts` then reads them as it
  reads a user's cache.
- `bootstrap_run(account_roles=(), **config)`: the real bootstrap/__main__.py run offline for repository
  `BOOTSTRAP_REPOSITORY`, its Pulumi.yaml defaults merged with `config`, in an account that holds the
  IAM roles `account_roles` (none by default) (cached per account and config).

The session never reaches the Hugging Face Hub: HF_HUB_OFFLINE=1 and an empty HF_HOME are set here,
before huggingface_hub is imported, so the preview's model facts come from the shipped fallback
unless a test fills a cache.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import importlib
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="eks-pd-llm-empty-hf-home-")

import pytest
import yaml

from components.config.declared import project_name
from components.config.stack import StackSettings, settings_from_config
from facts.instances import Ec2Gpu, Ec2InstanceType
from offline import OfflineRun, ask_recorded_cloud, run_offline, stack_config

# The empty Hugging Face home above is one per test process (each xdist worker imports this file): gone
# when that process ends.
atexit.register(shutil.rmtree, os.environ["HF_HOME"], True)

REPO = Path(__file__).resolve().parents[1]
KUBERAY_DIR = Path(__file__).resolve().parent / "data" / "kuberay-v1.7.0"

# Ends a session that ran Ray in-process with pytest's status, not a teardown crash (its docstring).
pytest_plugins = ["session_exit"]

# The real metrics exposition of the PD app: Ray's metrics endpoint scraped by the GPU lab on one H200
# (Ray 2.58.0, vLLM 0.26.0, NIXL 1.3.1, 2026-12-01; its header says what ran), with Serve's
# ray_serve_* and the engines' ray_vllm_* under the stack's model id. The one place that says which
# capture the dashboard, alerts and `pdctl top` are held to.
REAL_METRICS_EXPOSITION = REPO / "tests" / "data" / "lab-results" / "2026-12-01-h200-metrics-exposition.prom.gz"


def exposition_text(path: Path) -> str:
    return (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()).decode()


def exposition_samples(path: Path) -> list[tuple[str, dict[str, str], float]]:
    from measure.prometheus import samples

    return samples(exposition_text(path))


@pytest.fixture(scope="session")
def real_exposition() -> list[tuple[str, dict[str, str], float]]:
    return exposition_samples(REAL_METRICS_EXPOSITION)


@pytest.fixture(scope="session")
def real_metric_names(real_exposition) -> frozenset[str]:
    return frozenset(name for name, _, _ in real_exposition)


@pytest.fixture(scope="session")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not on PATH: install Debian's `prometheus` package (apt-get install prometheus; "
                    "`make test` does it) — the rule tests run the real Prometheus rule checker")
    return found


@pytest.fixture(scope="session")
def settings_for() -> Callable[..., StackSettings]:
    def build(stack: str = "dev", **overrides: str) -> StackSettings:
        raw, _secret_keys = stack_config(stack)
        raw.update(overrides)
        return settings_from_config(raw, project=project_name(), stack=stack, ask_cloud=ask_recorded_cloud)

    return build


@pytest.fixture(scope="session")
def offline_run() -> Callable[[str], OfflineRun]:
    return functools.cache(run_offline)


def strict_structural_schema(schema: Any) -> Any:
    """The CRD's openAPIV3Schema with unknown fields refused, as the API server does.

    A CRD schema lists `properties` without `additionalProperties: false`: the API server still
    rejects unknown fields under strict field validation (kubectl's default since 1.27) and silently
    prunes them otherwise — either way a misspelled field never reaches KubeRay. Plain jsonschema
    would accept it, so close every object that declares properties, unless it preserves unknown
    fields. Maps (`additionalProperties: {...}`) keep their value schema.
    """
    if isinstance(schema, list):
        return [strict_structural_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: strict_structural_schema(value) for key, value in schema.items()}
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        strict["additionalProperties"] = False
    return strict


# The CRD leaves `metadata` to the API server's ObjectMeta validation; this is its shape for the
# fields a RayService manifest sets (names are strings, labels and annotations string maps).
OBJECT_META_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
    },
    "anyOf": [{"required": ["name"]}, {"required": ["generateName"]}],
    "additionalProperties": False,
}


@pytest.fixture(scope="session")
def ray_service_crd_validator() -> Any:
    """jsonschema validator for a whole RayService object against KubeRay 1.7.0's CRD (ray.io/v1)."""
    import jsonschema

    # 18k lines: the C loader parses them in a fraction of the pure-Python loader's time.
    text = (KUBERAY_DIR / "ray.io_rayservices.yaml").read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v1,) = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
    schema = strict_structural_schema(v1["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = OBJECT_META_SCHEMA
    schema["properties"]["apiVersion"] = {"const": f"{crd['spec']['group']}/v1"}
    schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
    schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind", "metadata", "spec"})
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)



# ------------------------------------------------------------- an OpenAI-compatible endpoint

MODEL = "qwen3.5-9b"
TTFT = 0.15  # seconds before the first token
ITL = 0.04  # seconds between tokens


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.served_model = MODEL
        self.answer_model = MODEL
        self.answer = "Prefill and decode run on different GPUs."
        self.requests: list[dict] = []
        self.events: list[tuple[str, int]] = []  # ("start" | "end", max_tokens of the request), in server order
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def setup(self):
        super().setup()
        # As uvicorn does: each SSE event leaves at once, not held back by Nagle until the client's
        # delayed ACK (which adds ~40 ms to the second of two small writes).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def _json(self, body: dict, status: int = 200):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self._json({"object": "list", "data": [
                {"id": self.server.served_model, "object": "model", "created": 0, "owned_by": "ray"}]})
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        if self.path != "/v1/chat/completions":
            return self._json({"error": {"message": "not found"}}, 404)
        if body.get("stream"):
            return self._stream(body)
        self._json({
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": self.server.answer_model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.server.answer}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
        })

    def _stream(self, body: dict):
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
            server.events.append(("start", body.get("max_tokens")))
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 4)
            content = body["messages"][0]["content"]  # a string, or content parts (as vLLM's client sends)
            text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
            prompt_tokens = len(text.split())

            def send(payload):
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

            def chunk(delta, finish=None):
                return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            # As vLLM streams: the role-only chunk (not a token) goes out with the first token.
            time.sleep(TTFT)
            send(chunk({"role": "assistant", "content": ""}))
            for i in range(tokens):
                if i:
                    time.sleep(ITL)
                send(chunk({"content": f" tok{i}"}))
            send(chunk({}, "length"))
            if (body.get("stream_options") or {}).get("include_usage"):
                send({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                      "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                               "completion_tokens": tokens,
                                               "total_tokens": prompt_tokens + tokens}})
            self.wfile.write(b"data: [DONE]\n\n")
        finally:
            with server.lock:
                server.in_flight -= 1
                server.events.append(("end", body.get("max_tokens")))


@pytest.fixture
def on_controlled_clock() -> Callable[[Any], Any]:
    import looptime

    def run(coroutine):
        loop = looptime.new_event_loop(start=0)
        try:
            return loop.run_until_complete(coroutine)
        finally:
            loop.close()

    return run


@pytest.fixture
def serve_http(request) -> Callable[[Any], Any]:
    """`serve_http(server)` serves a local HTTP server on a thread until the test ends; returns it."""
    def start(http_server):
        threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

        def stop():
            http_server.shutdown()
            http_server.server_close()

        request.addfinalizer(stop)
        return http_server

    return start


@pytest.fixture
def server(serve_http) -> FakeOpenAI:
    return serve_http(FakeOpenAI())


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer trained here on a small corpus, saved as a transformers tokenizer
    directory: what `--tokenizer DIR` and the Hugging Face cache hold."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    words = ["prefill", "decode", "cache", "token", "layer", "engine", "transfer", "memory", "model", "serve",
             "request", "stream", "batch"]
    rng = random.Random(0)
    corpus = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(500)]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    directory = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|end|>").save_pretrained(directory)
    return directory


HF_SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """A Hugging Face cache in tmp_path, read offline as a user's would be; returns `add(repo_id,
    config, index_total_size=None)`, which lays out one model's files the way huggingface_hub
    stores them (refs/main → snapshots/<commit>/)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    importlib.reload(huggingface_hub.constants)  # huggingface_hub reads its environment at import

    def add(repo_id: str, config: dict[str, Any], index_total_size: int | None = None) -> Path:
        repo = tmp_path / "hf-home" / "hub" / f"models--{repo_id.replace('/', '--')}"
        snapshot = repo / "snapshots" / HF_SNAPSHOT
        snapshot.mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(HF_SNAPSHOT)
        (snapshot / "config.json").write_text(json.dumps(config))
        if index_total_size is not None:
            (snapshot / "model.safetensors.index.json").write_text(
                json.dumps({"metadata": {"total_size": index_total_size}, "weight_map": {}}))
        return snapshot

    yield add
    monkeypatch.undo()
    importlib.reload(huggingface_hub.constants)
BOOTSTRAP_REPOSITORY = "acme/eks-pd-llm"
BOOTSTRAP_ACCOUNT = "111122223333"
BOOTSTRAP_KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"


def _bootstrap_arn(resource_type: str, name: str, inputs: dict) -> str:
    """ARNs shaped like AWS's, so the policies that embed them read as they will in the account."""
    iam = f"arn:aws:iam::{BOOTSTRAP_ACCOUNT}"
    return {
        "aws:s3/bucket:Bucket": lambda: f"arn:aws:s3:::{inputs.get('bucket', name)}",
        "aws:kms/key:Key": lambda: f"arn:aws:kms:us-west-2:{BOOTSTRAP_ACCOUNT}:key/{BOOTSTRAP_KEY_ID}",
        "aws:iam/role:Role": lambda: f"{iam}:role/{name}",
        "aws:iam/policy:Policy": lambda: f"{iam}:policy{inputs.get('path', '/')}{inputs.get('name', name)}",
        "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
            lambda: f"{iam}:oidc-provider/token.actions.githubusercontent.com",
    }.get(resource_type, lambda: f"arn:aws:mock:::{name}")()


class _BootstrapMocks:
    """Fake AWS for the bootstrap: resources echo their inputs, with their name and an AWS-shaped ARN;
    IAM's role listing answers from `account_roles` (path + name of each role the account has) or, when
    that is an exception, fails with its text as the provider's failure (the SDK raises "invoke of … failed")."""

    def __init__(self, account_roles: tuple[str, ...] | BaseException = ()):
        self.account_roles = account_roles

    def list_roles(self, path_prefix: str) -> dict | tuple[dict, list[tuple[str, str]]]:
        if isinstance(self.account_roles, BaseException):
            return {}, [("pathPrefix", str(self.account_roles))]
        found = [role for role in self.account_roles if role.startswith(path_prefix or "/")]
        return {"names": [role.rsplit("/", 1)[1] for role in found],
                "arns": [f"arn:aws:iam::{BOOTSTRAP_ACCOUNT}:role{role}" for role in found],
                "pathPrefix": path_prefix, "id": "us-west-2"}

    def new_resource(self, args):
        arn = _bootstrap_arn(args.typ, args.name, args.inputs)
        return [f"{args.name}-id", {"arn": arn, "name": args.name, **args.inputs}]

    def call(self, args):
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": BOOTSTRAP_ACCOUNT, "arn": f"arn:aws:iam::{BOOTSTRAP_ACCOUNT}:user/admin",
                    "userId": "AIDABOOTSTRAP", "id": BOOTSTRAP_ACCOUNT}
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
        if args.token == "aws:iam/getRoles:getRoles":
            return self.list_roles(args.args.get("pathPrefix"))
        return {}


@pytest.fixture(scope="session")
def bootstrap_run(tmp_path_factory) -> Callable[..., OfflineRun]:
    """The real bootstrap/__main__.py under Pulumi mocks, its Pulumi.yaml defaults merged, in an account
    holding `account_roles` (IAM paths + names, e.g. /aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS;
    none by default), or whose role listing fails with `account_roles` when it is an exception."""
    runs: dict[tuple, OfflineRun] = {}

    def run(account_roles: tuple[str, ...] | BaseException = (), **config: str) -> OfflineRun:
        key = (account_roles, *sorted(config.items()))
        if key in runs:
            return runs[key]
        project = tmp_path_factory.mktemp("bootstrap") / "bootstrap"
        shutil.copytree(REPO / "bootstrap", project, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml"))
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.syspath_prepend(str(project))  # the Pulumi Python host puts the program's folder there
            # Its modules and packages, fresh for this run.
            local = {p.stem for p in project.iterdir() if p.stem != "__main__" and (p.suffix == ".py" or p.is_dir())}
            for module in [m for m in sys.modules if m.split(".")[0] in local]:
                monkeypatch.delitem(sys.modules, module)
            (project / "Pulumi.ci.yaml").write_text(yaml.safe_dump({"config": {
                "aws:region": "us-west-2",
                "eks-pd-llm-bootstrap:githubRepository": BOOTSTRAP_REPOSITORY,
                "eks-pd-llm-bootstrap:stateBucketName": "acme-pulumi-state",
                **{f"eks-pd-llm-bootstrap:{k}": v for k, v in config.items()},
            }}))
            runs[key] = run_offline("ci", project_dir=project, mocks=_BootstrapMocks(account_roles))
        return runs[key]

    return run


@pytest.fixture(scope="session")
def bare_gpu_type() -> Ec2InstanceType:
    """An EFA GPU type as EC2 would describe one without instance storage: no InstanceStorageInfo."""
    return Ec2InstanceType("x-gpu.8xlarge", vcpus=32, memory_mib=128 * 1024,
                           gpus=(Ec2Gpu("L4", "NVIDIA", 1, 24_576),), efa_supported=True,
                           efa_maximum_interfaces=1, network_cards_gbps=(25,))
