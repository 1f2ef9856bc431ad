"""API keys as the front door keeps them: salted hashes with per-key limits, and the per-minute windows
that enforce those limits. Standard library only: the Pulumi program writes the key table with
`key_table_document`, the ingress in the Ray pods reads it back with `KeyTable`.

Why one fast salted SHA-256 and not a slow password hash: keys are refused under `MIN_KEY_LENGTH`
characters and are meant to be random (`pdctl` says how to make one), so guessing one from its hash
is as hard as guessing the key; a slow hash would cost every request its milliseconds. The salt
(one per stack) keeps two stacks' tables from sharing hashes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

# The file the mounted Secret holds (its one data key).
KEY_TABLE_FILE = "keys.json"
MIN_KEY_LENGTH = 32
WINDOW_S = 60.0  # the limits are per minute
# How often the ingress looks at the mounted file: the kubelet replaces a mounted Secret's files in
# place (within its sync period, about a minute), so a revoked key stops working within that plus this.
RELOAD_INTERVAL_S = 2.0


def hash_key(salt: str, key: str) -> str:
    return hashlib.sha256(f"{salt}:{key}".encode()).hexdigest()


@dataclass(frozen=True)
class KeyLimits:
    """A key's limits per minute; None = unlimited."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True)
class KeyEntry:
    name: str  # what metrics and logs call the key (never the key itself)
    limits: KeyLimits


def key_table_document(salt: str, keys: Mapping[str, str], limits: Mapping[str, KeyLimits]) -> str:
    """The Secret's keys.json: {"salt", "keys": {hash: {"name", "requests_per_minute", "tokens_per_minute"}}}.
    `keys` maps each key's name to the key; `limits` each name to its limits."""
    table = {hash_key(salt, key): {"name": name, "requests_per_minute": limits[name].requests_per_minute,
                                   "tokens_per_minute": limits[name].tokens_per_minute}
             for name, key in sorted(keys.items())}
    return json.dumps({"salt": salt, "keys": table}, sort_keys=True)


@dataclass(frozen=True)
class KeyTable:
    salt: str
    entries: Mapping[str, KeyEntry]  # by hash

    @classmethod
    def from_document(cls, text: str) -> KeyTable:
        document = json.loads(text)
        return cls(document["salt"], {
            digest: KeyEntry(entry["name"], KeyLimits(entry.get("requests_per_minute"), entry.get("tokens_per_minute")))
            for digest, entry in document["keys"].items()})

    def lookup(self, presented: str) -> KeyEntry | None:
        # A lookup's timing can tell an attacker about a hash of their guess, never about a stored key.
        return self.entries.get(hash_key(self.salt, presented))


class KeyFile:
    """The mounted key table, read again whenever the file changes (checked every RELOAD_INTERVAL_S).
    A file that cannot be read or parsed keeps the last good table (none at first: every key refused)."""

    def __init__(self, path: str, clock=time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._checked = -math.inf
        self._stamp: tuple[int, int, int] | None = None
        self.table = KeyTable("", {})

    def current(self) -> KeyTable:
        now = self._clock()
        if now - self._checked >= RELOAD_INTERVAL_S:
            self._checked = now
            self._reload()
        return self.table

    def _reload(self) -> None:
        try:
            status = os.stat(self.path)
            stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
            if stamp != self._stamp:
                with open(self.path, encoding="utf-8") as handle:
                    self.table = KeyTable.from_document(handle.read())
                self._stamp = stamp
        except (OSError, ValueError, KeyError):
            pass


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer <key>` header (what OpenAI's SDKs send), else None."""
    scheme, _, key = (authorization or "").partition(" ")
    return key.strip() or None if scheme.lower() == "bearer" else None


@dataclass
class _Usage:
    requests: deque = field(default_factory=deque)  # admission times
    tokens: deque = field(default_factory=deque)  # (time, tokens) charged


class MinuteWindows:
    """Per-key sliding one-minute windows of requests and tokens. `share` divides each limit among
    the ingress replicas (Serve spreads a key's requests over them), so together they hold the limit."""

    def __init__(self, share: int = 1, clock=time.monotonic) -> None:
        self.share = max(1, share)
        self._clock = clock
        self._usage: dict[str, _Usage] = {}

    def _limit(self, limit: int | None) -> float:
        return math.inf if limit is None else max(1, limit // self.share)

    def _trim(self, usage: _Usage, now: float) -> None:
        while usage.requests and usage.requests[0] <= now - WINDOW_S:
            usage.requests.popleft()
        while usage.tokens and usage.tokens[0][0] <= now - WINDOW_S:
            usage.tokens.popleft()

    def admit(self, entry: KeyEntry) -> tuple[str, int] | None:
        """None and the request counted, or (which limit, seconds to wait) when the key is over a limit."""
        now = self._clock()
        usage = self._usage.setdefault(entry.name, _Usage())
        self._trim(usage, now)
        if len(usage.requests) >= self._limit(entry.limits.requests_per_minute):
            return "requests", _seconds_until(usage.requests[0] + WINDOW_S, now)
        token_limit = self._limit(entry.limits.tokens_per_minute)
        spent = sum(tokens for _, tokens in usage.tokens)
        if spent >= token_limit:
            # Wait until enough of the minute's tokens have aged out to be under the limit again.
            for charged_at, tokens in usage.tokens:
                spent -= tokens
                if spent < token_limit:
                    return "tokens", _seconds_until(charged_at + WINDOW_S, now)
        usage.requests.append(now)
        return None

    def charge(self, name: str, tokens: int) -> None:
        if tokens > 0:
            self._usage.setdefault(name, _Usage()).tokens.append((self._clock(), tokens))


def _seconds_until(moment: float, now: float) -> int:
    return max(1, math.ceil(moment - now))
