"""Pulumi.yaml, read once: the project's name and the settings its `config:` block declares (their
types and defaults, and which are secret), from YAML read strictly (a key set twice is refused).

The program (components/config/read.py) and the offline harness (offline/harness.py) both take
the declared keys from here."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from components.project import project_file
from serve_app.errors import ConfigError

ConfigType = Literal["string", "integer", "boolean", "array"]


@dataclass(frozen=True)
class DeclaredKey:
    """One `config:` entry of Pulumi.yaml; `default` is in the string form Config.get returns."""

    name: str
    type: ConfigType
    default: str | None
    description: str
    secret: bool = False  # `secret: true`: the CLI stores it encrypted


def as_config_string(value: Any) -> str:
    """A YAML value in the string form the Pulumi SDK hands a program (JSON for arrays and objects)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: the plain
    loader keeps the last one silently (the Pulumi CLI's Go YAML reader refuses it too)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, str) and key in seen:
                raise ConfigError(key, f"set on lines {seen[key]} and {line} of {node.start_mark.name}",
                                  "each key once", "YAML would silently keep the last one")
            seen.setdefault(key, line)
        return super().construct_mapping(node, deep)


# Booleans as YAML 1.2 and the Pulumi CLI's Go reader take them: true and false only. PyYAML's YAML 1.1
# would read `deletionProtection: yes` as true where the CLI hands the program the string "yes".
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml_strictly(path: Path) -> Any:
    """A YAML file as data; a key set twice in one mapping is refused (ConfigError naming it)."""
    with path.open(encoding="utf-8") as stream:
        return yaml.load(stream, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe


def declared_keys(path: Path | None = None) -> Mapping[str, DeclaredKey]:
    """The settings Pulumi.yaml declares, by the name a stack file uses (bare for the project);
    `path` defaults to the project's own (components/project.py finds it)."""
    return _declared_keys(path or project_file())


@functools.cache
def _declared_keys(path: Path) -> Mapping[str, DeclaredKey]:
    config = load_yaml_strictly(path)["config"]
    keys: dict[str, DeclaredKey] = {}
    for name, entry in config.items():
        if not isinstance(entry, dict):  # `key: value` short form
            entry = {"value": entry}
        default = entry.get("default", entry.get("value"))
        keys[name] = DeclaredKey(
            name=name,
            type=entry.get("type", "string"),
            default=None if default is None else as_config_string(default),
            description=" ".join(str(entry.get("description", "")).split()),
            secret=bool(entry.get("secret", False)),
        )
    return keys


def project_name(path: Path | None = None) -> str:
    return load_yaml_strictly(path or project_file())["name"]
