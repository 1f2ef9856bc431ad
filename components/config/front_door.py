"""The front door's settings: the load balancer in front of the serve Service (none, internal or
internet-facing), who may reach it, its TLS certificate, and the API keys and their per-minute limits
(docs/FRONT_DOOR.md). Refused here, before any resource: a public door without CIDRs, a certificate
of another region, a limit of 0, a key too short to be random, keys in plain text."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from components.config.names import ipv4_cidrs
from front_door.keys import MIN_KEY_LENGTH, KeyLimits
from serve_app.config import KeyedIngress
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackKeyModel

FrontDoorScheme = Literal["none", "internal", "internet-facing"]
API_KEYS_KEY = "apiKeys"
# A key's name becomes a metric label and a log field: short, plain, never the key.
_KEY_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
# A DNS name of two or more labels (RFC 1123), lowercase or not; no wildcard: clients call one name.
_DNS_NAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")
# arn:aws:acm:<region>:<account>:certificate/<id>
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:([a-z0-9-]+):\d{12}:certificate/[0-9a-f-]+$")
# Where the Ray pods find the key table and the front door's code (components/manifests/ray_service.py).
KEYS_MOUNT = "/etc/eks-pd-llm/api-keys"
CODE_MOUNT = "/opt/eks-pd-llm"
FRONT_DOOR_PACKAGE = Path(__file__).resolve().parents[2] / "front_door"
FRONT_DOOR_MODULES = ("__init__.py", "keys.py", "ingress.py", "engine.py")
# Offline, each key of an `apiKeys` the plan cannot decrypt: long enough for the key check, usable nowhere.
OFFLINE_KEY = "offline-placeholder-key".ljust(MIN_KEY_LENGTH, "-")
# A door's first key, in the form Pulumi.yaml's apiKeys documents.
ADD_A_KEY = """pulumi config set --secret apiKeys '{"app-team": "<openssl rand -hex 24>"}'"""


def front_door_sources() -> dict[str, str]:
    """The front door package's files the Ray pods import, by file name."""
    return {name: (FRONT_DOOR_PACKAGE / name).read_text(encoding="utf-8") for name in FRONT_DOOR_MODULES}


class FrontDoorSettings(StackKeyModel):
    """The load balancer, its reach and TLS, and the API keys' limits (the keys are a secret, read apart)."""

    scheme: FrontDoorScheme = Field(alias="frontDoor", description='"none", "internal" or "internet-facing"')
    allowed_cidrs: tuple[str, ...] = Field(alias="frontDoorAllowedCidrs", description="a list of IPv4 CIDRs")
    certificate_arn: str = Field(alias="frontDoorCertificateArn",
                                 description='"" or an ACM certificate ARN of the stack\'s region')
    hostname: str = Field(alias="frontDoorHostname", description=(
        '"" or the DNS name clients call (a name frontDoorCertificateArn covers), e.g. llm.example.com'))
    requests_per_minute: int = Field(alias="apiKeyRequestsPerMinute", ge=1,
                                     description="a whole number ≥ 1 (requests per key per minute)")
    tokens_per_minute: int = Field(alias="apiKeyTokensPerMinute", ge=1,
                                   description="a whole number ≥ 1 (prompt + completion tokens per key per minute)")
    key_limits: Mapping[str, KeyLimits] = Field(alias="apiKeyLimits", description=(
        'JSON text of an object: key name → {"requestsPerMinute": n, "tokensPerMinute": n}, each n ≥ 1'))

    @field_validator("allowed_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return ipv4_cidrs(value)

    @field_validator("key_limits", mode="before")
    @classmethod
    def _limits(cls, value: object) -> dict[str, KeyLimits]:
        setting = cls.field("key_limits")
        try:
            data = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            raise setting.refuse(value) from None
        if not isinstance(data, dict):
            raise setting.refuse(value)
        limits = {}
        for name, entry in data.items():
            known = {"requestsPerMinute", "tokensPerMinute"}
            if not isinstance(entry, dict) or not set(entry) <= known or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in entry.values()):
                raise setting.refuse(value, why=f"{name}: a limit is a whole number ≥ 1 (0 would refuse every request)")
            limits[name] = KeyLimits(entry.get("requestsPerMinute"), entry.get("tokensPerMinute"))
        return limits

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, value: str) -> str:
        if value and not _DNS_NAME.match(value):
            raise cls.field("hostname").refuse(value)
        return value.lower()

    @model_validator(mode="after")
    def _reach(self) -> FrontDoorSettings:
        if self.scheme == "internet-facing" and not self.allowed_cidrs:
            raise self.field("allowed_cidrs").refuse(
                [], "the CIDRs that may call the endpoint from the internet (0.0.0.0/0 only if you mean anyone)",
                "frontDoor internet-facing needs an explicit list of callers")
        return self

    def check_certificate(self, region: str) -> None:
        if not self.certificate_arn:
            return
        match = _ACM_ARN.match(self.certificate_arn)
        setting = self.field("certificate_arn")
        if match is None:
            raise setting.refuse(self.certificate_arn)
        if match.group(1) != region:
            raise setting.refuse(self.certificate_arn, f"an ACM certificate of {region}",
                                 "a load balancer can only use a certificate of its own region")
        if self.scheme != "none" and not self.hostname:
            # Clients verify the certificate against the name they call; no ACM certificate covers the
            # load balancer's own *.elb.amazonaws.com name (docs/SOURCES.md#front-door-tls).
            raise self.field("hostname").refuse(
                "", "the DNS name frontDoorCertificateArn covers, pointed at the loadBalancerHostname output",
                "with a certificate, clients must call a name it covers, not the load balancer's elb.amazonaws.com one")

    def limits(self, name: str) -> KeyLimits:
        own = self.key_limits.get(name, KeyLimits())
        return KeyLimits(own.requests_per_minute or self.requests_per_minute,
                         own.tokens_per_minute or self.tokens_per_minute)


@dataclass(frozen=True)
class FrontDoor:
    """The validated front door: its settings, the key names (never the keys) and the ingress it renders."""

    settings: FrontDoorSettings
    key_names: tuple[str, ...]
    salt: str

    @property
    def enabled(self) -> bool:
        return self.settings.scheme != "none"

    @property
    def keyed_ingress(self) -> KeyedIngress | None:
        if not self.enabled:
            return None
        digest = hashlib.sha256("".join(front_door_sources().values()).encode()).hexdigest()[:16]
        return KeyedIngress(keys_file=f"{KEYS_MOUNT}/keys.json", code_version=digest)

    @property
    def tls(self) -> bool:
        return bool(self.settings.certificate_arn)

    @property
    def port(self) -> int:
        return 443 if self.tls else 80

    @property
    def notes(self) -> tuple[str, ...]:
        """What the preview says about the door: info, not warnings (`plan --strict` passes on them, as it
        must on the shipped dev stack, which has no key until its owner sets one)."""
        if not self.enabled:
            return ()
        found = []
        if not self.key_names:
            found.append(f"frontDoor {self.settings.scheme} with no apiKeys: the door refuses every request (401) "
                         f"until a key is added: {ADD_A_KEY}, then pulumi up (only the keys' Secret changes; "
                         "nothing restarts)")
        if not self.tls:
            found.append("frontDoor without frontDoorCertificateArn: plain HTTP on port 80, so prompts, answers and "
                         "API keys travel unencrypted between callers and the Ray pods (docs/FRONT_DOOR.md)")
        else:
            found.append("frontDoor TLS ends at the load balancer: from it to the Ray pods, inside the VPC, requests "
                         "and API keys travel as plain HTTP (docs/FRONT_DOOR.md)")
        if self.settings.hostname:
            found.append(f"frontDoorHostname {self.settings.hostname}: point it at the loadBalancerHostname output "
                         "(a CNAME record, or a Route 53 alias record) before clients call it")
        return tuple(found)


def offline_api_keys(key_limits_text: str) -> str:
    """What an `apiKeys` secret the offline plan cannot decrypt stands for: a key table of its shape, with
    a key for each name apiKeyLimits gives (the only names the plan can know) or one; no key is usable."""
    try:
        limits = json.loads(key_limits_text or "{}")
    except ValueError:
        limits = {}  # the settings check names apiKeyLimits' own mistake
    names = sorted(limits) if isinstance(limits, dict) else []
    return json.dumps(dict.fromkeys(names or ["offline-placeholder"], OFFLINE_KEY))


def api_key_names(text: str, settings: FrontDoorSettings) -> tuple[str, ...]:
    """The key names of the `apiKeys` secret (JSON object name → key), checked without ever naming a key."""
    if not text:
        _refuse_limits_of_unknown_keys(settings, {})
        return ()
    try:
        keys = json.loads(text)
    except ValueError:
        keys = None
    allowed = (f'JSON text of an object, key name → key: names lowercase letters, digits and "-", keys at least '
               f"{MIN_KEY_LENGTH} random characters")
    if not isinstance(keys, dict) or not all(isinstance(key, str) for key in keys.values()):
        raise ConfigError(API_KEYS_KEY, "<secret>", allowed)
    for name, key in keys.items():
        if not _KEY_NAME.match(name):
            raise ConfigError(API_KEYS_KEY, "<secret>", allowed, f"{name!r} is not a key name")
        if len(key) < MIN_KEY_LENGTH:
            raise ConfigError(API_KEYS_KEY, "<secret>", allowed,
                              f"the key named {name!r} is shorter than {MIN_KEY_LENGTH} characters "
                              "(make one with: openssl rand -hex 24)")
    _refuse_limits_of_unknown_keys(settings, keys)
    return tuple(sorted(keys))


def _refuse_limits_of_unknown_keys(settings: FrontDoorSettings, keys: Mapping[str, str]) -> None:
    """A limit for a key that does not exist limits nobody: a typo in its name, or a key not added yet."""
    unknown = sorted(set(settings.key_limits) - set(keys))
    if unknown:
        raise ConfigError(FrontDoorSettings.key("key_limits"), sorted(settings.key_limits), "names of apiKeys",
                          f"no key is named {unknown[0]!r}" + ("" if keys else f" (no {API_KEYS_KEY} set)"))
