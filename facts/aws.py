"""AWS facts the preview checks rest on that no API call returns, as data.

- EKS refuses control-plane subnets in some availability zone IDs (names map to IDs differently in
  every account, so only the ID tells): use1-az3 (us-east-1), usw1-az2 (us-west-1) and cac1-az3
  (ca-central-1). Node groups may still use those AZs. docs/SOURCES.md#eks-control-plane-azs
- The documentation placeholders: RFC 5737 reserves 192.0.2.0/24, 198.51.100.0/24 and
  203.0.113.0/24 for documentation, so no operator's egress is there; AWS's documentation uses the
  account ids below as examples. A stack file holding them has not been filled in yet.
  docs/SOURCES.md#documentation-placeholders
- EFA GPU nodes get 2560 huge pages of 2 MiB (5,120 MiB, what the EKS EFA guide's pods request as
  `hugepages-2Mi`); the node's user data allocates them (components/node_boot.py): no file of the
  AL2023 NVIDIA AMI guarantees any. The kubelet takes pre-allocated huge pages out of the node's
  allocatable memory. One figure for every EFA instance type. docs/SOURCES.md#efa-hugepages
- The offline mock cloud (offline/mock_cloud.py) answers as account 123456789012, AWS's own
  documentation example: no real caller has it, so the program knows it runs offline when
  sts:GetCallerIdentity says so (components/discovery.py), and only then accepts placeholders.
"""

from __future__ import annotations

import ipaddress

EFA_HUGEPAGES_2MI = 2560
HUGEPAGE_2MI_MIB = 2

EKS_CONTROL_PLANE_REFUSED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})

DOCUMENTATION_NETWORKS = tuple(ipaddress.IPv4Network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))
DOCUMENTATION_ACCOUNT_IDS = frozenset({"123456789012", "111122223333", "444455556666"})
OFFLINE_ACCOUNT_ID = "123456789012"
# How the offline mock cloud starts a refusal that is its own (a type it has no record of), not AWS's.
OFFLINE_REFUSAL = "not recorded offline: "


def is_documentation_cidr(cidr: str) -> bool:
    """True for a CIDR inside a documentation range (0.0.0.0/0 contains them, and is no placeholder)."""
    network = ipaddress.IPv4Network(cidr, strict=False)
    return any(network.subnet_of(doc) for doc in DOCUMENTATION_NETWORKS)
