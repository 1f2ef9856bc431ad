"""The Kubernetes objects and Helm values this stack applies, as plain data, one module per thing built:
`ray_service` (the RayService), `serving_namespace` (the serving namespace, the operator's namespace
and the NetworkPolicies), `helm_values` (the charts' values).

Pure functions, no Pulumi: the Pulumi components hand these dicts to the provider, `pdctl render`
prints them for `kubectl apply`, and tests check them field by field (and against the KubeRay CRD
schema). They take settings that were validated before any resource, so they refuse nothing.
"""
