"""Ending a test session that ran Ray in-process: pytest's exit status, not a teardown crash.

The lab and validation tiers run Ray (its core worker, gRPC and metrics threads) inside the pytest
process. Even after `ray.shutdown()`, the interpreter's own teardown can crash in those native
threads (ray-project/ray#36885 and kin): a CI run printed "1285 passed" and then make reported a
segmentation fault, failing the build. Once pytest has reported, a session that loaded Ray's core
leaves with pytest's exit status and skips the interpreter's teardown (atexit handlers included).
Registered by tests/conftest.py.
"""

from __future__ import annotations

import os
import sys

import pytest

_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    status = config.stash.get(_EXIT_STATUS, None)
    if status is not None and "ray._raylet" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
