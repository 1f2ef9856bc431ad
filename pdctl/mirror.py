"""`pdctl mirror-model`: copy a Hugging Face model into the S3 mirror the stack loads from.

The files a vLLM load needs (safetensors, configs, tokenizer) are downloaded with huggingface_hub
into a temporary directory, then uploaded with boto3 (multipart for the multi-GB shards) under
`<prefix>/<org>/<name>/`, the layout whose last two parts `modelSource` reads the model's
architecture from (serve_app.config.ModelSettings.architecture_key). boto3, not the AWS CLI through a
subprocess: a pinned library in requirements-cli.txt, testable against a local S3 (moto's server),
instead of a binary the user may not have, at a version we cannot pin.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serve_app.config import S3_SCHEME, s3_location

# What vLLM reads for a safetensors model: weights, model and generation configs, tokenizer files.
ALLOW_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.json", "*.model", "*.tiktoken", "*.txt",
                  "*.jinja")


@dataclass(frozen=True)
class MirrorResult:
    model_source: str  # what to set `modelSource` to
    objects: int
    total_bytes: int


def mirror_model(model_id: str, destination: str, *, s3_client: Any, revision: str | None = None,
                 token: str | None = None, download: Callable[..., str] | None = None) -> MirrorResult:
    """Copy `model_id` (org/name) to `destination` (s3://bucket/prefix). ValueError for a bad argument."""
    if model_id.count("/") != 1 or any(not part for part in model_id.split("/")):
        raise ValueError(f"model id {model_id!r} is not org/name")
    bucket, prefix = s3_location(destination)
    key_root = f"{prefix}/{model_id}"
    if download is None:
        from huggingface_hub import snapshot_download

        download = snapshot_download
    with tempfile.TemporaryDirectory(prefix="pdctl-mirror-") as workdir:
        local = Path(download(repo_id=model_id, revision=revision, token=token, local_dir=workdir,
                              allow_patterns=list(ALLOW_PATTERNS)))
        files = sorted(p for p in local.rglob("*") if p.is_file() and ".cache" not in p.relative_to(local).parts)
        if not any(p.suffix == ".safetensors" for p in files):
            raise ValueError(f"{model_id} has no safetensors weights; the Run:ai streamer reads safetensors only")
        for path in files:
            s3_client.upload_file(str(path), bucket, f"{key_root}/{path.relative_to(local).as_posix()}")
        return MirrorResult(model_source=f"{S3_SCHEME}{bucket}/{key_root}", objects=len(files),
                            total_bytes=sum(p.stat().st_size for p in files))
