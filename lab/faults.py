"""Faults under a steady mixed load, one after another, on the app the lab serves.

    python -m lab faults --stack dev            (a GPU host; `lab/gpu_detached.sh` runs it there)
    python -m lab.rehearse_faults_cpu OUT       (the same on a CPU, engines faked: lab/fake_engine.py)

The lab serves the stack's PD app (its rendered `build_pd_openai_app` args with the lab overlay)
and, beside it, a colocated baseline of the same model. A closed-loop load of short and long prompts
runs against the PD app throughout. Each fault in turn: observe, inject, observe until the killed
part is back and requests succeed again (or the fault's time runs out), keep the load a little
longer, then compare greedy outputs with the baseline's. Faults:

- `prefill-replica`, `decode-replica`: SIGKILL the Serve replica's process (Serve replaces it);
- `prefill-engine`, `decode-engine`: SIGKILL the vLLM engine core process under the replica (the
  replica's health check fails, Serve replaces the replica);
- `serve-controller`: SIGKILL the Serve controller (Ray restarts it; replicas keep serving).

Per fault the results say: requests that failed, seconds until requests succeed again, seconds until
the replica (or controller) is back, whether KV transfers resumed (the ray_vllm_nixl_* transfer
counter grew after recovery, new NIXL handshake lines, no NIXL error lines since the fault), and
whether greedy outputs still equal the baseline's. The arithmetic is `lab.recovery` (unit-tested);
this module drives Ray and Serve.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import evidence, recovery, workload
from measure.latency import RequestSample, summarize

FAULTS = ("prefill-replica", "decode-replica", "prefill-engine", "decode-engine", "serve-controller")
ENGINE_CORE = re.compile(rb"EngineCore")
NIXL_TRANSFERS = "ray_vllm_nixl_xfer_time_seconds_count"


@dataclass(frozen=True)
class LoadSpec:
    """A mixed load, every `long_every`-th request a long prompt: closed-loop, `concurrency` clients; or,
    with `rate_per_s`, open-loop: Poisson arrivals at that rate whatever is in flight, so a stall shows
    as queued requests and a gap in delivered tokens rather than as fewer requests sent."""

    concurrency: int = 4
    short_prompt_tokens: int = 64
    long_prompt_tokens: int = 2048
    long_every: int = 4
    output_tokens: int = 32
    seed: int = 0
    rate_per_s: float | None = None


@dataclass(frozen=True)
class FaultTimes:
    before_s: float = 10.0  # load before the fault, for a baseline
    recover_s: float = 240.0  # at most this long for the replica to be back and requests to succeed
    after_s: float = 15.0  # load after recovery: do transfers and answers hold?


class SteadyLoad:
    """The load, in a thread with its own event loop, so the caller can kill things meanwhile."""

    def __init__(self, base_url: str, model_id: str, spec: LoadSpec, token_range: tuple[int, int]) -> None:
        self.base_url, self.model_id, self.spec, self.token_range = base_url, model_id, spec, token_range
        self.samples: list[RequestSample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="steady-load", daemon=True)

    def start(self) -> SteadyLoad:
        self._thread.start()
        return self

    def stop(self) -> list[RequestSample]:
        self._stop.set()
        self._thread.join(timeout=workload.REQUEST_TIMEOUT_S + 30)
        return self.snapshot()

    def snapshot(self) -> list[RequestSample]:
        with self._lock:
            return list(self.samples)

    async def _run(self) -> None:
        async with workload.openai_client(self.base_url) as client:
            if self.spec.rate_per_s is not None:
                await self._open_loop(client, self.spec.rate_per_s)
            else:
                await asyncio.gather(*(self._client(client, i) for i in range(self.spec.concurrency)))

    def _prompt(self, rng: random.Random, sent: int) -> list[int]:
        low, high = self.token_range
        length = self.spec.long_prompt_tokens if sent % self.spec.long_every == 0 else self.spec.short_prompt_tokens
        return [rng.randrange(low, high) for _ in range(length)]

    async def _send(self, client, prompt: list[int]) -> RequestSample:
        sample = await workload.stream_completion(client, workload.completion_body(
            self.model_id, prompt, self.spec.output_tokens, stream=True))
        with self._lock:
            self.samples.append(sample)
        return sample

    async def _client(self, client, index: int) -> None:
        rng = random.Random(self.spec.seed * 1000 + index)
        sent = 0
        while not self._stop.is_set():
            sent += 1
            sample = await self._send(client, self._prompt(rng, sent))
            if not sample.ok:
                await asyncio.sleep(0.2)  # a failing endpoint answers at once: do not spin

    async def _open_loop(self, client, rate_per_s: float) -> None:
        """Seeded Poisson arrivals (as measure.latency.poisson_arrival_times draws them) until stopped;
        then the requests in flight finish."""
        rng = random.Random(self.spec.seed)
        in_flight: set[asyncio.Task] = set()
        due, sent = time.perf_counter(), 0
        while True:
            due += rng.expovariate(rate_per_s)
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if self._stop.is_set():
                break
            sent += 1
            task = asyncio.create_task(self._send(client, self._prompt(rng, sent)))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        await asyncio.gather(*in_flight)


# ── Serve, as the lab sees it ──────────────────────────────────────────────────────────────────

def serve_details() -> dict[str, Any] | None:
    """Serve's instance details (applications, deployments, replicas with pids), or None while the
    controller cannot be reached."""
    from ray import serve

    try:
        return serve.context._get_global_client().get_serve_details()
    except Exception:  # a dead or restarting controller: the observation says so
        return None


def observe(app: str, controller: bool = True) -> recovery.Observation:
    """Serve now: RUNNING replicas per deployment and (with `controller`, a state API call) the
    controller's pid."""
    details = serve_details()
    running: dict[str, frozenset[str]] = {}
    controller_pid = None
    if details is not None:
        controller_pid = _controller_pid() if controller else None
        deployments = details.get("applications", {}).get(app, {}).get("deployments", {})
        for name, deployment in deployments.items():
            running[name] = frozenset(r["replica_id"] for r in deployment.get("replicas", [])
                                      if r.get("state") == "RUNNING")
    return recovery.Observation(at=time.perf_counter(), running=running, controller_pid=controller_pid)


def _controller_pid() -> int | None:
    from ray.util.state import list_actors

    alive = list_actors(filters=[("class_name", "=", "ServeController"), ("state", "=", "ALIVE")], detail=True)
    return alive[0].pid if alive else None


def replica_pids(app: str, deployment: str) -> list[int]:
    deployments = (serve_details() or {}).get("applications", {}).get(app, {}).get("deployments", {})
    replicas = deployments.get(deployment, {}).get("replicas", [])
    return [r["pid"] for r in replicas if r.get("state") == "RUNNING" and r.get("pid")]


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (from /proc: the lab runs on Linux)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def gpu_process_pids() -> set[int]:
    """Processes holding GPU memory (nvidia-smi's compute apps); empty without a GPU."""
    import subprocess

    try:
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {int(line) for line in text.split() if line.strip().isdigit()}


def engine_core_pid(replica_pid: int) -> int | None:
    """The vLLM engine core under a replica: the descendant whose command line names EngineCore
    (vLLM retitles it VLLM::EngineCore_DP0 where setproctitle is installed), else the one
    descendant that holds GPU memory."""
    below = descendants(replica_pid)
    for pid in below:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if ENGINE_CORE.search(handle.read()):
                    return pid
        except OSError:
            continue
    on_gpu = sorted(set(below) & gpu_process_pids())
    return on_gpu[0] if len(on_gpu) == 1 else None


def deployment_names(app_args: dict[str, Any]) -> dict[str, str]:
    """The prefill and decode Serve deployments of an app as the lab holds it, its serveConfigV2 args
    (serve_app.render.deployment_names reads the typed config instead)."""
    from serve_app.render import PHASE_DEPLOYMENT_PREFIX, serve_deployment_id

    deployment_id = serve_deployment_id(app_args["decode_config"]["model_loading_config"]["model_id"])
    return {phase: f"{prefix}{deployment_id}" for phase, prefix in PHASE_DEPLOYMENT_PREFIX.items()}


def inject(fault: str, app: str, names: dict[str, str]) -> dict[str, Any]:
    """Kill what `fault` names; returns what was killed (pid) and how it is judged back."""
    if fault == "serve-controller":
        pid = _controller_pid()
        if pid is None:
            raise RuntimeError("no Serve controller to kill")
        os.kill(pid, signal.SIGKILL)
        return {"killed_pid": pid, "is_back": "controller_replaced"}
    phase, part = fault.split("-")
    replicas = replica_pids(app, names[phase])
    if not replicas:
        raise RuntimeError(f"no running replica of {names[phase]}")
    replica = replicas[0]
    target = replica if part == "replica" else engine_core_pid(replica)
    if target is None:
        raise RuntimeError(f"no engine core process under replica pid {replica}")
    os.kill(target, signal.SIGKILL)
    return {"killed_pid": target, "replica_pid": replica, "deployment": names[phase], "is_back": "replica_replaced"}


# ── One fault, then all of them ────────────────────────────────────────────────────────────────

@dataclass
class FaultRun:
    """What the fault loop needs from the lab around it."""

    app: str
    names: dict[str, str]
    load: SteadyLoad
    scrape_metrics: Callable[[], str]
    log_dir: Path
    greedy_check: Callable[[], dict[str, Any]]
    times: FaultTimes = field(default_factory=FaultTimes)


def run_fault(fault: str, run: FaultRun, log: Callable[[str], None]) -> dict[str, Any]:
    observations: list[recovery.Observation] = []
    time.sleep(run.times.before_s / 2)
    observations.append(observe(run.app))
    metrics_before = run.scrape_metrics()
    logs_before = evidence.scan_log_dir(run.log_dir)
    time.sleep(run.times.before_s / 2)
    observations.append(observe(run.app))
    injected_at = time.perf_counter()
    killed = inject(fault, run.app, run.names)
    log(f"{fault}: killed pid {killed['killed_pid']}")
    is_back = recovery.controller_replaced if killed["is_back"] == "controller_replaced" \
        else recovery.replica_replaced(killed["deployment"])
    back_s = None
    while time.perf_counter() - injected_at < run.times.recover_s:
        time.sleep(0.5)
        observations.append(observe(run.app))
        back_s = recovery.back_after(observations, injected_at, is_back)
        hit = recovery.outage(run.load.snapshot(), injected_at)
        if back_s is not None and hit["time_to_success_s"] is not None:
            break
    log(f"{fault}: back after {back_s} s")
    recovered_at = time.perf_counter()
    metrics_recovered = run.scrape_metrics()
    time.sleep(run.times.after_s)
    metrics_after = run.scrape_metrics()
    logs_after = evidence.scan_log_dir(run.log_dir)
    samples = run.load.snapshot()
    hit = recovery.outage(samples, injected_at)
    after_recovery = [s for s in samples if s.start >= recovered_at]
    transfers = recovery.counter_increase(metrics_recovered, metrics_after, NIXL_TRANSFERS)
    return {
        "fault": fault,
        **{k: v for k, v in killed.items() if k != "is_back"},
        "requests": hit,
        "back_after_s": back_s,
        "recovered": back_s is not None and hit["time_to_success_s"] is not None,
        "after_recovery": {"requests": summarize(after_recovery)["requests"]},
        "kv_transfers": {
            "transfers_after_recovery": transfers,  # None: no engine exported the NIXL metrics
            "transfers_during_outage": recovery.counter_increase(metrics_before, metrics_recovered, NIXL_TRANSFERS),
            "new_handshakes": logs_after.compatibility_checks_passed - logs_before.compatibility_checks_passed,
            "new_nixl_error_lines": logs_after.trouble[len(logs_before.trouble):][:10],
        },
        "greedy_after_recovery": run.greedy_check(),
    }


def kv_resumed(result: dict[str, Any]) -> bool | None:
    """Transfers resumed: the counter grew after recovery (None without metrics, then the requests
    after recovery must have succeeded and no NIXL error line appeared)."""
    kv = result["kv_transfers"]
    if kv["new_nixl_error_lines"]:
        return False
    if kv["transfers_after_recovery"] is None:
        return None
    return kv["transfers_after_recovery"] > 0


def verdict(results: list[dict[str, Any]]) -> dict[str, Any]:
    checks: dict[str, bool] = {}
    for result in results:
        fault = result["fault"]
        checks[f"recovered:{fault}"] = result["recovered"]
        after = result["after_recovery"]["requests"]
        checks[f"requests_ok_after_recovery:{fault}"] = after["failed"] == 0 and after["succeeded"] > 0
        greedy = result["greedy_after_recovery"]
        checks[f"greedy_equals_baseline:{fault}"] = bool(greedy.get("passed"))
        if kv_resumed(result) is not None:
            checks[f"kv_transfers_resumed:{fault}"] = bool(kv_resumed(result))
    return {"checks": checks, "passed": bool(checks) and all(checks.values())}
