"""Labels and taints that tie node groups, device plugins and Ray pods together.

They live in one place because a mismatch between a node group's taint and a pod's toleration
does not fail: the pod just stays Pending while GPU nodes bill by the hour.
"""

ROLE_LABEL = "role"
SYSTEM_ROLE = "system"
GPU_ROLE = "gpu-worker"

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"

SYSTEM_NODE_SELECTOR = {ROLE_LABEL: SYSTEM_ROLE}
GPU_NODE_SELECTOR = {ROLE_LABEL: GPU_ROLE}
# Which phase a Ray worker pod serves, and, on a GPU node group that holds one phase only (a phase
# with a group of its own, and then the shared group too), which phase its nodes are for.
PHASE_LABEL = "eks-pd-llm/phase"


def gpu_node_labels(phases: tuple[str, ...]) -> dict[str, str]:
    """The labels of a GPU node group holding `phases`' worker pods, which those pods select. A group
    of one phase names it, so neither phase's pods land on the other's nodes; the GPU DaemonSets
    select the role only and run on every GPU group."""
    return {**GPU_NODE_SELECTOR, **({PHASE_LABEL: phases[0]} if len(phases) == 1 else {})}

# The Cluster Autoscaler's AWS provider reads this node label to know a node is a GPU node: until the
# device plugin advertises its GPUs it counts them as coming, instead of scaling out again for the
# pods still Pending (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "GPU Node
# Groups"). docs/SOURCES.md#cluster-autoscaler-gpu-label
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"


def accelerator_label_value(gpu_model: str) -> str:
    """The label's value for an NVIDIA GPU model as EC2 names it (L4 → nvidia-l4): any value marks the
    node; the model keeps it readable."""
    return f"nvidia-{gpu_model.lower()}"


# Kubernetes form of the GPU taint's toleration (pod specs, Helm values).
GPU_TOLERATION = {
    "key": GPU_TAINT_KEY,
    "operator": "Equal",
    "value": GPU_TAINT_VALUE,
    "effect": GPU_TAINT_EFFECT,
}

# Extended resources the device plugins advertise.
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_2MI_RESOURCE = "hugepages-2Mi"

# Namespaces. The operator's own, the device plugins' (the cluster's system namespace; the GPU and
# node exporters run there too), the monitoring stack's, and those the stack must never create or
# relabel as its serving namespace.
KUBERAY_NAMESPACE = "kuberay-system"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
MONITORING_NAMESPACE = "monitoring"
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", KUBERAY_NAMESPACE,
                       MONITORING_NAMESPACE)

# On the Prometheus pods (kube-prometheus-stack's prometheusSpec.podMetadata): what the serving
# namespace's NetworkPolicy admits to the Ray metrics port, together with the monitoring namespace.
SCRAPER_POD_LABELS = {"eks-pd-llm/scraper": "prometheus"}
