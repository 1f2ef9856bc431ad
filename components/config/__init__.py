"""The stack's configuration, read, typed and judged before any resource: one file per job.

declared.py   Pulumi.yaml read once (strict YAML): the declared keys, their types, defaults, secrecy
read.py       a stack's raw config into typed values (unknown, retired and provider keys refused)
names.py      what regions, AZs, zone IDs, DNS labels and the cluster name look like
network.py, cluster.py, nodes.py, charts.py, observability.py, ray_service.py, workload.py
              the slices: each a StackKeyModel whose fields' aliases are the stack keys
zones.py      the AZ plan, from what EC2 reports
serving.py    the PD app checked against its GPU node groups (ServingSettings)
stack.py      the assembly: settings_from_config -> StackSettings
runtime.py    the running program's config (what the Pulumi CLI merged)
"""
