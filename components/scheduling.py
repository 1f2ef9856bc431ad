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
