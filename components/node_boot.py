"""What a GPU node's launch template user data tells it at boot, before the kubelet starts: nodeadm's
NodeConfig (node-local storage, components/node_storage.py) and, on EFA types, the 2 MiB huge pages the
worker pod requests.

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

from components.node_storage import NODECONFIG_MIME_SUBTYPE, NodeStorage, node_config
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


def user_data(storage: NodeStorage) -> str | None:
    """Base64 MIME multi-part user data for a GPU node's launch template, or None with nothing to add."""
    config = node_config(storage)
    pages = hugepages_2mi(storage)
    if config is None and not pages:
        return None
    document = MIMEMultipart(boundary=MIME_BOUNDARY)
    if config is not None:
        # 7bit, not base64: the YAML is ASCII, and the part is read as-is.
        document.attach(MIMEApplication(yaml.safe_dump(config, sort_keys=False), NODECONFIG_MIME_SUBTYPE,
                                        encode_7or8bit))
    if pages:
        document.attach(MIMEText(hugepages_script(pages), "x-shellscript", "us-ascii"))
    return base64.b64encode(document.as_bytes()).decode("ascii")
