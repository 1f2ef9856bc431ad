"""The key table and the per-minute windows the ingress enforces (front_door/keys.py), on a fake clock."""

from __future__ import annotations

import json
import os

from front_door.keys import (
    RELOAD_INTERVAL_S,
    KeyEntry,
    KeyFile,
    KeyLimits,
    KeyTable,
    MinuteWindows,
    bearer_key,
    key_table_document,
)

KEY = "a" * 40


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_table_holds_salted_hashes_never_a_key_and_finds_the_key_by_them():
    document = key_table_document("salt-1", {"app-team": KEY}, {"app-team": KeyLimits(10, 100)})
    assert KEY not in document
    table = KeyTable.from_document(document)
    assert table.lookup(KEY) == KeyEntry("app-team", KeyLimits(10, 100))
    assert table.lookup(KEY[:-1]) is None
    # Another stack's salt makes other hashes for the same key.
    assert json.loads(document)["keys"].keys() != json.loads(
        key_table_document("salt-2", {"app-team": KEY}, {"app-team": KeyLimits()}))["keys"].keys()


def test_bearer_keys_as_openai_sdks_send_them():
    assert bearer_key(f"Bearer {KEY}") == KEY
    assert bearer_key(f"bearer  {KEY} ") == KEY
    assert bearer_key(f"Basic {KEY}") is None
    assert bearer_key("Bearer ") is None
    assert bearer_key(None) is None


def test_past_its_requests_per_minute_a_key_waits_until_the_oldest_leaves_the_window():
    clock = Clock()
    windows = MinuteWindows(clock=clock)
    entry = KeyEntry("k", KeyLimits(requests_per_minute=2))
    assert windows.admit(entry) is None
    clock.now += 20
    assert windows.admit(entry) is None
    clock.now += 10
    assert windows.admit(entry) == ("requests", 30)  # the first request leaves the window in 30 s
    clock.now += 30
    assert windows.admit(entry) is None
    # A refused request is not counted: the window still holds the second and the fourth.
    assert windows.admit(entry) == ("requests", 20)


def test_past_its_tokens_per_minute_a_key_waits_until_enough_tokens_age_out():
    clock = Clock()
    windows = MinuteWindows(clock=clock)
    entry = KeyEntry("k", KeyLimits(tokens_per_minute=100))
    assert windows.admit(entry) is None
    windows.charge("k", 70)
    clock.now += 15
    assert windows.admit(entry) is None
    windows.charge("k", 40)
    assert windows.admit(entry) == ("tokens", 45)  # 110 spent; under 100 once the 70 leave
    clock.now += 45
    assert windows.admit(entry) is None


def test_replicas_share_a_limit_and_keys_do_not_share_windows():
    windows = MinuteWindows(share=2, clock=Clock())
    tight = KeyEntry("tight", KeyLimits(requests_per_minute=4))
    assert [windows.admit(tight) for _ in range(3)] == [None, None, ("requests", 60)]
    assert windows.admit(KeyEntry("other", KeyLimits(requests_per_minute=4))) is None


def test_the_key_file_is_read_again_when_it_changes_and_a_broken_one_keeps_the_last_table(tmp_path):
    clock = Clock()
    path = tmp_path / "keys.json"
    path.write_text(key_table_document("s", {"a": KEY}, {"a": KeyLimits()}))
    keys = KeyFile(str(path), clock=clock)
    assert keys.current().lookup(KEY) is not None
    staged = tmp_path / "next"
    staged.write_text(key_table_document("s", {}, {}))
    os.replace(staged, path)  # how the kubelet swaps a mounted Secret's files
    assert keys.current().lookup(KEY) is not None  # not looked at again yet
    clock.now += RELOAD_INTERVAL_S
    assert keys.current().lookup(KEY) is None  # revoked
    path.write_text("{not json")
    clock.now += RELOAD_INTERVAL_S
    assert keys.current().entries == {}


def test_without_a_readable_file_every_key_is_refused(tmp_path):
    assert KeyFile(str(tmp_path / "missing.json")).current().lookup(KEY) is None
