"""What a GPU node's launch template user data tells it at boot, before the kubelet starts: nodeadm's
NodeConfig (node-local storage, components/node_storage.py), on EFA types the 2 MiB huge pages the
worker pod requests, and with gpuImageSnapshotId the image volume mounted as containerd's state.

The image volume is mounted by its filesystem label (NVMe device names do not follow the launch
template's mapping) from a shell part, which cloud-init runs before nodeadm starts containerd
(nodeadm-run.service runs After=cloud-final.service). A node whose volume does not show up fails its
boot loudly rather than pulling the image into the root volume's directory unnoticed.

Huge pages are set here, not assumed: the AL2023 NVIDIA AMI installs the EFA software with
`efa_installer.sh --minimal` (amazon-eks-ami templates/al2023/provisioners/install-efa.sh) and no file
of the AMI sets `vm.nr_hugepages` (its /etc/sysctl.conf sets inotify, map count, pid and keepalive
limits only), so how many pages a node offers would otherwise rest on what the EFA installer's
packages do at boot. A node whose kubelet reports fewer `hugepages-2Mi` than the pod requests leaves
every worker Pending. The user data's shell part writes the count to /etc/sysctl.d (kept across
reboots) and sets it at once; cloud-init runs it before nodeadm starts the kubelet (nodeadm-run.service
runs After=cloud-final.service), so the kubelet's first report already counts them. The count is
facts/aws.py's, the same the worker pod requests (components/sizing.py). docs/SOURCES.md#efa-hugepages

The document is built as data: the NodeConfig a dict dumped with yaml.safe_dump, both parts wrapped in
a MIME multi-part document by the standard library's email package (EKS merges a launch template's
MIME user data with its own bootstrap when the template names no AMI).
"""

from __future__ import annotations

import base64
import shlex
from email.encoders import encode_7or8bit
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import yaml

from components.node_storage import (
    CONTAINERD_STATE,
    IMAGE_VOLUME_LABEL,
    NODECONFIG_MIME_SUBTYPE,
    NodeStorage,
    node_config,
)
from facts.aws import EFA_HUGEPAGES_2MI

# Fixed, so the same settings give the same user data (a random boundary would show the launch
# template as changed on every preview).
MIME_BOUNDARY = "==eks-pd-llm-nodeconfig=="
HUGEPAGES_SYSCTL_FILE = "/etc/sysctl.d/90-eks-pd-llm-hugepages.conf"


def hugepages_2mi(storage: NodeStorage) -> int:
    """How many 2 MiB huge pages the node allocates at boot: EFA types only."""
    return EFA_HUGEPAGES_2MI if storage.instance.efa_capable else 0


def hugepages_script(pages: int) -> str:
    """The shell part: keep `pages` huge pages across reboots, allocate them now, and fail loudly
    (cloud-init's log) when the kernel could not find them."""
    setting = f"vm.nr_hugepages = {pages}"
    return "\n".join((
        "#!/bin/bash",
        "set -euo pipefail",
        f"echo {shlex.quote(setting)} > {HUGEPAGES_SYSCTL_FILE}",
        f"sysctl -w vm.nr_hugepages={pages}",
        f'test "$(cat /proc/sys/vm/nr_hugepages)" -ge {pages}',
        "",
    ))


# How long boot waits for the image volume's label to appear (udev names it once the device is up).
IMAGE_VOLUME_WAIT_SECONDS = 60


def image_volume_script() -> str:
    """The shell part: mount the volume restored from gpuImageSnapshotId as containerd's state, before
    containerd starts; fail the boot (cloud-init's log) when it is not there."""
    device = f"/dev/disk/by-label/{IMAGE_VOLUME_LABEL}"
    return "\n".join((
        "#!/bin/bash",
        "set -euo pipefail",
        f"for _ in $(seq {IMAGE_VOLUME_WAIT_SECONDS}); do [ -e {device} ] && break; udevadm settle; sleep 1; done",
        f"test -e {device}",
        "systemctl stop containerd || true",
        f"mkdir -p {CONTAINERD_STATE}",
        f"echo '{device} {CONTAINERD_STATE} xfs defaults,noatime,nofail 0 2' >> /etc/fstab",
        f"mount {CONTAINERD_STATE}",
        "",
    ))


def user_data(storage: NodeStorage) -> str | None:
    """Base64 MIME multi-part user data for a GPU node's launch template, or None with nothing to add."""
    config = node_config(storage)
    pages = hugepages_2mi(storage)
    if config is None and not pages and not storage.image_snapshot_id:
        return None
    document = MIMEMultipart(boundary=MIME_BOUNDARY)
    if config is not None:
        # 7bit, not base64: the YAML is ASCII, and the part is read as-is.
        document.attach(MIMEApplication(yaml.safe_dump(config, sort_keys=False), NODECONFIG_MIME_SUBTYPE,
                                        encode_7or8bit))
    if pages:
        document.attach(MIMEText(hugepages_script(pages), "x-shellscript", "us-ascii"))
    if storage.image_snapshot_id:
        document.attach(MIMEText(image_volume_script(), "x-shellscript", "us-ascii"))
    return base64.b64encode(document.as_bytes()).decode("ascii")
