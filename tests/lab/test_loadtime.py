"""The load-time script rehearsed on CPU with the tiny shape: the checkpoint it writes is what vLLM's
loader reads back tensor for tensor, and every loader reports a figure or the reason it has none."""

from __future__ import annotations

import json

from lab.loadtime import main, tensor_shapes, write_checkpoint
from lab.models import LLAMA3_8B, TINY_LLAMA


def test_the_8b_shape_is_llama_3_8bs_parameter_count():
    count = sum(__import__("math").prod(dims) for _, dims in tensor_shapes(LLAMA3_8B))
    assert count == LLAMA3_8B.parameter_count()  # 8.03 B, 16.06 GB in bf16


def test_rehearsal_on_cpu_reports_every_loader_both_ways(tmp_path):
    files = write_checkpoint(tmp_path / "ckpt", TINY_LLAMA, shard_bytes=2 * 2**20)
    assert len(files) > 1  # shards, as a real checkpoint has
    assert main(["--dir", str(tmp_path / "ckpt"), "--out", str(tmp_path / "out"), "--shape", "tiny"]) == 0
    result = json.loads((tmp_path / "out" / "loadtime.json").read_text())
    disk_bytes = result["disk"]["bytes"]
    weights = TINY_LLAMA.parameter_count() * 2
    assert weights < disk_bytes < weights + 64 * 1024  # the safetensors headers on top
    direct = result["disk"]["o_direct_read_gb_per_s"]
    assert direct is None or direct > 0  # a figure past the page cache, or none where O_DIRECT is refused
    timings = {(t["loader"], t["page_cache"].split(" ")[0]): t for t in result["timings"]}
    assert set(timings) == {(loader, state) for loader in ("vllm-default", "runai-streamer")
                            for state in ("cold", "warm")}
    for (loader, _), timing in timings.items():
        if loader == "vllm-default":
            assert timing["bytes"] == weights and timing["gb_per_s"] > 0
        else:  # not installed on this machine, or a figure: never silently nothing
            assert timing["error"] or timing["gb_per_s"] > 0
    assert result["device"] == "cpu" and result["versions"]["vllm"]
