"""checkov on every Kubernetes object the dev and prod stacks apply (Helm charts' contents aside).

The objects are the `kubernetes:*` resources the real program registers under mocks (with an HF
token set, so the Secret and its env reference exist), written out as manifests. checkov's
kubernetes framework checks built-in kinds only and passes over a RayService, yet KubeRay makes
the head and worker Pods from the RayService's pod templates: those templates are also written out
as Deployments (`<rayService>-head`, `<rayService>-<workerGroup>`) so every Pod check reaches what
the cluster will run.

Each finding is fixed or listed, with its reason, in policy/checkov_suppressions.yaml; an entry
that matches no finding any more fails too, so the list cannot rot. checkov lives in
`.venv-checkov` (policy/requirements-checkov.txt says why), which `make test` creates.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdctl.resources import canonical
from policy import rules

REPO = Path(__file__).resolve().parents[2]
CHECKOV_VENV = REPO / ".venv-checkov"
CHECKOV_REQUIREMENTS = REPO / "policy" / "requirements-checkov.txt"
SUPPRESSIONS_FILE = REPO / "policy" / "checkov_suppressions.yaml"
STACKS = ("dev", "prod")
CANARY = "canary"
MANIFEST_FIELDS = ("metadata", "spec", "type", "data", "stringData", "immutable")
# checkov runs in a virtualenv of its own and takes its time: `make test` runs it, `make test-fast` not.
pytestmark = pytest.mark.slow


def manifest(resource_type: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """`kubernetes:<group>/<version>:<Kind>` + inputs → the object the API server receives."""
    _, group_version, kind = resource_type.split(":")
    api_version = group_version.removeprefix("core/")
    # canonical: the engine hands whole numbers over as floats (65534.0), which checkov's uid checks
    # do not read as numbers; the API server receives them as integers.
    return {"apiVersion": api_version, "kind": kind,
            **{k: canonical(inputs[k]) for k in MANIFEST_FIELDS if k in inputs}}


def template_labels(obj: dict[str, Any], group: str) -> dict[str, str]:
    """The labels a RayService's pod template gives its pods (the NetworkPolicies select on them)."""
    cluster = obj["spec"]["rayClusterConfig"]
    groups = {"head": cluster["headGroupSpec"], **{g["groupName"]: g for g in cluster["workerGroupSpecs"]}}
    return dict(groups[group]["template"].get("metadata", {}).get("labels", {}))


def pod_template_deployments(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The RayService's head and worker pod templates as Deployments, for checkov's Pod checks."""
    found = []
    for template in rules.pod_templates(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", obj):
        name = f"{obj['metadata']['name']}-{template.group}"
        labels = {"app.kubernetes.io/name": name, **template_labels(obj, template.group)}
        found.append({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": obj["metadata"].get("namespace", "default")},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": dict(template.spec)}},
        })
    return found


def cluster_objects(stack: str) -> list[dict[str, Any]]:
    from offline import run_offline

    run = run_offline(stack, secrets={"hfToken": "hf_offlineplaceholdertoken"})
    objects = [manifest(r.type, r.inputs) for r in run.resources
               if r.type.startswith("kubernetes:") and r.type not in rules.HELM_CHART_TYPES]
    # checkov scans built-in workloads (the image pre-pull DaemonSets) itself; only the RayService's
    # templates need writing out.
    return objects + [d for obj in objects if obj["kind"] == "RayService" for d in pod_template_deployments(obj)]


def canary_objects() -> list[dict[str, Any]]:
    """A privileged pod outside the serving namespace: checkov must flag it and no suppression cover it."""
    pod_spec = {"containers": [{"name": "debug", "image": "busybox:1.36", "securityContext": {"privileged": True}}]}
    return [{"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "debug-gpu-workers", "namespace": "default"},
             "spec": {"selector": {"matchLabels": {"app": "debug"}},
                      "template": {"metadata": {"labels": {"app": "debug"}}, "spec": pod_spec}}}]


@pytest.fixture(scope="session")
def checkov() -> Path:
    cli = CHECKOV_VENV / "bin" / "checkov"
    if not cli.exists():
        pytest.fail(f"{cli} is missing: `make test` installs {CHECKOV_REQUIREMENTS.relative_to(REPO)} there")
    return cli


@pytest.fixture(scope="module")
def scan(checkov, tmp_path_factory) -> dict[str, Any]:
    """One checkov run over both stacks' objects (a folder each) and the canary."""
    root = tmp_path_factory.mktemp("cluster-objects")
    objects: dict[str, list[dict[str, Any]]] = {stack: cluster_objects(stack) for stack in STACKS}
    objects[CANARY] = canary_objects()
    for folder, objs in objects.items():
        (root / folder).mkdir()
        for i, obj in enumerate(objs):
            (root / folder / f"{i:02d}-{obj['kind']}-{obj['metadata']['name']}.yaml").write_text(yaml.safe_dump(obj))
    done = subprocess.run([str(checkov), "-d", str(root), "--framework", "kubernetes", "--skip-download",
                           "-o", "json"], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = json.loads(done.stdout)
    findings = [{"folder": Path(f["file_path"]).parts[1], "file": Path(f["file_path"]).name,
                 "check": f["check_id"], "resource": f["resource"], "name": f["check_name"]}
                for f in report["results"]["failed_checks"]]
    passed_files = {Path(f["file_path"]).name for f in report["results"]["passed_checks"]}
    return {"objects": objects, "findings": findings, "passed_files": passed_files, "summary": report["summary"]}


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    doc = yaml.safe_load(SUPPRESSIONS_FILE.read_text())
    return [{**e, "kind": kind} for kind in ("suppressed", "pending_fix") for e in doc.get(kind) or []]


def covering(finding: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["check"] == finding["check"]
            and any(fnmatch.fnmatchcase(finding["resource"], pattern) for pattern in e["resources"])]


def stack_findings(scan) -> list[dict[str, Any]]:
    return [f for f in scan["findings"] if f["folder"] in STACKS]


def test_every_object_the_stacks_apply_is_scanned(scan):
    for stack, secrets in (("dev", ["Secret"] * 2), ("prod", ["Secret"] * 3)):
        kinds = sorted(o["kind"] for o in scan["objects"][stack])
        # the Ray image pre-pull DaemonSets (GPU and system nodes); serving, KubeRay and monitoring
        # namespaces, the serving namespace's five NetworkPolicies, the HF token Secret and the front
        # door's key Secret (prod: and the GCS store's token), the RayService and its three pod templates
        # (head, prefill and decode workers); the PD dashboard ConfigMap and the front door's code
        # ConfigMap, the Ray PodMonitor, the PD PrometheusRule, the gp3 StorageClass and the front door's
        # NLB Service
        assert kinds == [*["ConfigMap"] * 2, *["DaemonSet"] * 2, *["Deployment"] * 3, *["Namespace"] * 3,
                         *["NetworkPolicy"] * 5, "PodMonitor", "PrometheusRule", "RayService", *secrets,
                         "Service", "StorageClass"], kinds
    assert scan["summary"]["parsing_errors"] == 0
    # checkov counts every built-in object it parsed (the RayService, a CRD, is covered through its
    # pod templates); Namespaces have no check of their own, Deployments and Secrets must have run.
    built_in = [o for objs in scan["objects"].values() for o in objs if o["kind"] != "RayService"]
    assert scan["summary"]["resource_count"] >= len(built_in)
    checked = scan["passed_files"] | {f["file"] for f in scan["findings"]}
    for stack in STACKS:
        for i, obj in enumerate(scan["objects"][stack]):
            if obj["kind"] in {"Deployment", "Secret"}:
                assert f"{i:02d}-{obj['kind']}-{obj['metadata']['name']}.yaml" in checked


def test_every_finding_is_fixed_or_suppressed_with_a_reason(scan, entries):
    unexplained = [f"{f['folder']}: {f['check']} {f['resource']} ({f['name']})"
                   for f in stack_findings(scan) if not covering(f, entries)]
    assert unexplained == []


def test_every_suppression_still_matches_a_finding(scan, entries):
    findings = stack_findings(scan)
    stale = [f"{e['kind']} {e['check']} {e['resources']}" for e in entries
             if not any(covering(f, [e]) for f in findings)]
    assert stale == [], "fixed: remove these entries from policy/checkov_suppressions.yaml"


def test_every_suppression_says_why(entries):
    for entry in entries:
        assert set(entry) == {"check", "resources", "reason", "kind"}, entry
        assert entry["resources"] and len(entry["reason"]) >= 40, entry


def test_suppressions_are_scoped_to_the_serving_pods(scan, entries):
    """A privileged pod anywhere else is still a finding, whatever its name."""
    canary = [f for f in scan["findings"] if f["folder"] == CANARY]
    privileged = [f for f in canary if f["check"] == "CKV_K8S_16"]
    assert privileged and not any(covering(f, entries) for f in privileged)
