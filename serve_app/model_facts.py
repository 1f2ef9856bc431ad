"""The model's own facts, read at preview: `read_model_facts(model_source) -> ModelFacts`.

What the GPU-fit check needs is in two small files of the checkpoint: `config.json` (layers, heads,
KV heads, head_dim, layer types, dtype, experts) and `model.safetensors.index.json` (the weights'
exact byte size, every expert included). They are read through `huggingface_hub`, so the preview
behaves as the user's other Hugging Face tools do: `HF_HOME`/`HF_HUB_CACHE` choose the cache (a
file already there is not downloaded again), `HF_HUB_OFFLINE=1` reads only the cache, and the token
is the user's own (`HF_TOKEN`, or `hf auth login`), which a gated repo (meta-llama/*) needs. A
`modelSource` that is a local directory is read directly. Parsing is facts.models' (pure).

A single-file checkpoint has no index: its size then comes from the safetensors header on the Hub
(`get_safetensors_metadata`, online only). Without either, a dense model's size is estimated from
its shapes; a hybrid or MoE model's cannot be, and is not sized.

Before reading, one quick request asks the Hub about the repo (`HUB_PROBE_TIMEOUT_S`): a Hub that
does not answer is told at once (then only the cache is read) instead of after huggingface_hub's
retries; a 404 is a model that does not exist (`missing`, which the caller refuses); a gated repo
is recorded (`gated`: the cluster then needs an hfToken).

When nothing can be read, `architecture` is None and `problem` says why: the caller falls back to
the shipped facts (facts/models.py) or warns that the fit is not checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from facts.models import ModelArchitecture, architecture_from_hf_config, known_model, load_architecture

CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
# safetensors dtype names → bytes per element (the header's names, not torch's).
_SAFETENSORS_DTYPE_BYTES = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I16": 2,
                            "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}


@dataclass(frozen=True)
class ModelFacts:
    source: str  # modelSource as given
    architecture: ModelArchitecture | None
    origin: str  # where the architecture was read
    problem: str | None = None  # why it could not be read, when it could not
    missing: bool = False  # the Hub answered that no such model exists (404)
    gated: bool = False  # the Hub says the repo is gated: downloads need a token with access


# One probe of the Hub, answered in well under this on any working network.
HUB_PROBE_TIMEOUT_S = 2.0


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def _hub_checkpoint_bytes(repo_id: str) -> int | None:
    """Weight bytes of a Hub checkpoint without an index, from its safetensors header (online)."""
    from huggingface_hub import get_safetensors_metadata

    metadata = get_safetensors_metadata(repo_id)
    counts = {dtype: count for file in metadata.files_metadata.values()
              for dtype, count in file.parameter_count.items()}
    if any(dtype not in _SAFETENSORS_DTYPE_BYTES for dtype in counts):
        return None
    return sum(count * _SAFETENSORS_DTYPE_BYTES[dtype] for dtype, count in counts.items())


def _read_hub(repo_id: str, *, cache_only: bool) -> ModelArchitecture:
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    def download(name: str) -> Path:
        return Path(hf_hub_download(repo_id, name, endpoint=constants.ENDPOINT, local_files_only=cache_only))

    config = json.loads(download(CONFIG_FILE).read_text(encoding="utf-8"))
    checkpoint_bytes: int | None = None
    try:
        index = json.loads(download(INDEX_FILE).read_text(encoding="utf-8"))
        checkpoint_bytes = int(index["metadata"]["total_size"])
    except (EntryNotFoundError, LocalEntryNotFoundError):
        try:
            checkpoint_bytes = None if cache_only else _hub_checkpoint_bytes(repo_id)
        except Exception:  # no safetensors: the size stays unknown
            checkpoint_bytes = None
    files = f"config.json and {INDEX_FILE}" if checkpoint_bytes else "config.json"
    return architecture_from_hf_config(config, hf_id=repo_id, checkpoint_bytes=checkpoint_bytes,
                                       source=f"{repo_id} {files} via huggingface_hub")


def read_model_facts(model_source: str) -> ModelFacts:
    """The architecture of `model_source` (a Hugging Face id or a local directory), from its own files."""
    if Path(model_source).is_dir():
        try:
            return ModelFacts(model_source, load_architecture(model_source, hf_id=model_source),
                              f"local directory {model_source}")
        except (OSError, ValueError, KeyError) as error:
            return ModelFacts(model_source, None, "none", f"{model_source}: {_first_line(error)}")
    if model_source.startswith("/") or model_source.count("/") != 1:
        return ModelFacts(model_source, None, "none",
                          "not a Hugging Face id (org/name) and not a directory on this machine")
    hub = _ask_hub(model_source)
    if hub == HubAnswer.MISSING:
        return ModelFacts(model_source, None, "none", "the Hub has no such model (404), or it is private and no "
                          "token here can see it", missing=True)
    cache_only = hub in (HubAnswer.OFFLINE, HubAnswer.UNREACHABLE)
    # Without the Hub's answer, a recorded model still says whether its repository is gated.
    recorded = known_model(model_source)
    gated = hub == HubAnswer.GATED or (cache_only and recorded is not None and recorded.gated)
    origin = "huggingface_hub (the local cache)" if cache_only else "huggingface_hub (the local cache or the Hub)"
    try:
        return ModelFacts(model_source, _read_hub(model_source, cache_only=cache_only), origin, gated=gated)
    except Exception as error:  # any failure to read is reported, never raised
        return ModelFacts(model_source, None, "none", _hub_problem(error, hub), gated=gated)


class HubAnswer(StrEnum):
    """What the one probe of the Hub said about a repo."""

    FOUND = "found"
    GATED = "gated"
    MISSING = "missing"
    UNREACHABLE = "unreachable"
    OFFLINE = "offline"  # HF_HUB_OFFLINE=1: not asked


def _ask_hub(repo_id: str) -> HubAnswer:
    """One request for the repo's metadata (public even for a gated repo), no retries."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if constants.HF_HUB_OFFLINE:
        return HubAnswer.OFFLINE
    try:
        info = HfApi(endpoint=constants.ENDPOINT).model_info(repo_id, timeout=HUB_PROBE_TIMEOUT_S)
    except GatedRepoError:  # a subclass of RepositoryNotFoundError: first
        return HubAnswer.GATED
    except RepositoryNotFoundError:
        return HubAnswer.MISSING
    except Exception:  # no answer in time, no route, a proxy's error page: treated alike
        return HubAnswer.UNREACHABLE
    return HubAnswer.GATED if info.gated else HubAnswer.FOUND


def _hub_problem(error: Exception, hub: HubAnswer) -> str:
    """What a user can act on, for the errors huggingface_hub raises most."""
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError

    if isinstance(error, GatedRepoError) or (hub == HubAnswer.GATED and not isinstance(error, LocalEntryNotFoundError)):
        return "gated: needs a token with access (HF_TOKEN or `hf auth login`)"
    if isinstance(error, LocalEntryNotFoundError) and hub == HubAnswer.UNREACHABLE:
        return f"the Hub did not answer within {HUB_PROBE_TIMEOUT_S:g} s and the model is not in the Hugging Face cache"
    if isinstance(error, LocalEntryNotFoundError) and hub == HubAnswer.OFFLINE:
        return "HF_HUB_OFFLINE=1 and the model is not in the Hugging Face cache"
    return f"{type(error).__name__}: {_first_line(error)}"


__all__ = ["ModelFacts", "read_model_facts"]
