"""What happens to requests while the Ray head restarts, as Ray and KubeRay document it.

`HEAD_RESTART[gcs_fault_tolerance]` is stated by `pdctl plan` for the stack's RayService and in the
docs/OPERATE.md's "What survives what". These are the projects' documented behaviours, not measurements
(docs/SOURCES.md#gcs-fault-tolerance).

Sources (read 2026-12):
- Ray Serve, "Add End-to-End Fault Tolerance", sections "Head node recovery: Ray GCS fault
  tolerance" and "Head node failure":
  https://docs.ray.io/en/latest/serve/production-guide/fault-tolerance.html
- KubeRay, "GCS fault tolerance in KubeRay" (fate-sharing without it; workers get
  RAY_gcs_rpc_server_reconnect_timeout_s=600): https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/kuberay-gcs-ft.html
- KubeRay, "RayService high availability" (a request fails only while it is in the head's proxy):
  https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/rayservice-high-availability.html
- Ray Core, "GCS Fault Tolerance" (unavailable during recovery: actor and placement group
  creation, worker node registration; running tasks and actors stay alive):
  https://docs.ray.io/en/latest/ray-core/fault_tolerance/gcs.html
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SOURCES = (
    "https://docs.ray.io/en/latest/serve/production-guide/fault-tolerance.html",
    "https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/kuberay-gcs-ft.html",
    "https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/rayservice-high-availability.html",
    "https://docs.ray.io/en/latest/ray-core/fault_tolerance/gcs.html",
)


@dataclass(frozen=True)
class HeadRestart:
    """Documented behaviour of a RayService while its head pod restarts."""

    in_flight: str
    new_requests: str
    meanwhile: str
    basis: str = "documented by Ray/KubeRay, not measured here"

    def to_dict(self) -> dict:
        return {**asdict(self), "sources": list(SOURCES)}


HEAD_RESTART: dict[bool, HeadRestart] = {
    True: HeadRestart(
        in_flight=("requests being served by replicas on the GPU workers continue (the workers, their "
                   "replicas and engines keep running); a request passing through the head pod's own "
                   "Serve proxy fails"),
        new_requests=("served by the Serve proxies on the worker pods, which stay endpoints of the serve "
                      "Service; a `kubectl port-forward` that happened to pick the head pod breaks and must "
                      "be restarted"),
        meanwhile=("no replica can be created or restarted, no autoscaling, no serve config update, until "
                   "the head is back and reloads the cluster state from the GCS store; workers wait up to "
                   "600 s for it"),
    ),
    False: HeadRestart(
        in_flight="fail: KubeRay restarts every worker pod with the head (the cluster state was in its memory)",
        new_requests=("fail until the worker pods are back and both engines have loaded the model again "
                      "(minutes)"),
        meanwhile="the whole RayCluster is rebuilt; set gcsFaultTolerance to keep the workers",
    ),
}
