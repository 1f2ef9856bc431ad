"""`pdctl mirror-model` against a real S3 API served locally (moto's server), never the network; the
Hugging Face side is a stand-in download that writes a model's files where snapshot_download would."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from pdctl.mirror import mirror_model
from serve_app.config import ModelSettings

BUCKET = "acme-models"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # Moto's servers in one process share their accounts: start from an empty one whatever ran before.
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST"))
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")
    client.create_bucket(Bucket=BUCKET)
    yield client
    server.stop()


def fake_hub(files: dict[str, bytes]):
    def download(*, repo_id, revision, token, local_dir, allow_patterns):
        assert "*.safetensors" in allow_patterns
        for name, data in files.items():
            path = Path(local_dir) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (Path(local_dir) / ".cache").mkdir(exist_ok=True)
        (Path(local_dir) / ".cache" / "lock").write_text("hub bookkeeping, not the model")
        return local_dir
    return download


MODEL_FILES = {
    "config.json": b"{}",
    "tokenizer.json": b"{}",
    "model-00001-of-00002.safetensors": b"\0" * 1024,
    "model-00002-of-00002.safetensors": b"\1" * 2048,
    "model.safetensors.index.json": b"{}",
}


def test_copies_the_model_under_prefix_org_name_and_names_the_model_source(s3):
    result = mirror_model("Qwen/Qwen3.5-9B", f"s3://{BUCKET}/mirror", s3_client=s3, download=fake_hub(MODEL_FILES))
    assert result.model_source == f"s3://{BUCKET}/mirror/Qwen/Qwen3.5-9B"
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="mirror/")["Contents"]
    assert {o["Key"]: o["Size"] for o in listed} == {
        f"mirror/Qwen/Qwen3.5-9B/{name}": len(data) for name, data in MODEL_FILES.items()}
    assert (result.objects, result.total_bytes) == (5, sum(len(d) for d in MODEL_FILES.values()))
    # The stack reads the architecture back from that layout (capacity check, cold-start figures).
    assert ModelSettings(model_source=result.model_source).architecture_key == "Qwen/Qwen3.5-9B"


@pytest.mark.parametrize(("model", "destination", "says"), [
    ("Qwen", f"s3://{BUCKET}/mirror", "org/name"),
    ("Qwen/Qwen3.5-9B", f"s3://{BUCKET}", "whole bucket"),
    ("Qwen/Qwen3.5-9B", "https://example.com/x", "s3://"),
])
def test_bad_arguments_are_refused_before_any_download(s3, model, destination, says):
    def no_download(**_):
        raise AssertionError("downloaded before checking the arguments")
    with pytest.raises(ValueError, match=says):
        mirror_model(model, destination, s3_client=s3, download=no_download)


def test_a_model_without_safetensors_is_refused_and_nothing_uploaded(s3):
    with pytest.raises(ValueError, match="safetensors"):
        mirror_model("acme/pickled", f"s3://{BUCKET}/other", s3_client=s3,
                     download=fake_hub({"config.json": b"{}", "pytorch_model.bin": b"x"}))
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="other/")
