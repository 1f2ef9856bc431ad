"""The endpoint's front door: API keys, per-key limits and per-key accounting in Ray Serve's own
ingress (docs/FRONT_DOOR.md).

`keys` (standard library only) is what the Pulumi program and the ingress share: how a key is
hashed, the key table the mounted Secret holds, the per-minute limits. `ingress` is the Ray Serve LLM
ingress that enforces them; it imports Ray and runs only in the Ray pods (and the tests). `engine` is
the vLLM engine that starts a one-GPU replica in two processes instead of four (`singleProcessEngine`),
Ray pods only too. The stack ships this package to the pods in a ConfigMap (with keys, or with that
setting): it imports nothing else of this repository.
"""
