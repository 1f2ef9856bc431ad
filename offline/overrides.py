"""`--set KEY=VALUE`: one stack key set over the stack file for one run, as `pulumi config set` would
store it. One parser for pdctl and the lab: the key is stripped, the value kept as written (it may hold
`=`), a pair without `=` or a key, and a key set twice, are refused as a ConfigError naming `--set`."""

from __future__ import annotations

from collections.abc import Sequence

from serve_app.errors import ConfigError


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` texts (a repeatable `--set`) as {key: value}."""
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("--set", pair, "KEY=VALUE with a stack key, e.g. decodeMaxReplicas=2")
        if key in overrides:
            raise ConfigError("--set", pair, "each key once", f"{key} is already set to {overrides[key]!r}")
        overrides[key] = value
    return overrides
