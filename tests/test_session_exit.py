"""A session that ran Ray in-process ends with pytest's own exit status (tests/session_exit.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

# atexit runs in the interpreter's teardown, which the hook skips once Ray's core is loaded.
TEST_FILE = '''
import atexit
{ray_import}
atexit.register(lambda: print("interpreter teardown ran", flush=True))

def test_one():
    assert {outcome}
'''


def _pytest(tmp_path: Path, *, ray: bool, passes: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_one.py").write_text(TEST_FILE.format(
        ray_import="import ray._raylet" if ray else "", outcome="True" if passes else "False"))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "session_exit",
                           "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
                          cwd=tmp_path, env={"PYTHONPATH": str(TESTS), "PATH": ""}, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("passes", "status", "summary"), [(True, 0, "1 passed"), (False, 1, "1 failed")])
def test_a_session_with_ray_keeps_pytests_status_and_skips_teardown(tmp_path: Path, passes: bool, status: int,
                                                                     summary: str) -> None:
    run = _pytest(tmp_path, ray=True, passes=passes)
    assert run.returncode == status, run.stdout + run.stderr
    assert summary in run.stdout
    assert "interpreter teardown ran" not in run.stdout


def test_a_session_without_ray_ends_normally(tmp_path: Path) -> None:
    run = _pytest(tmp_path, ray=False, passes=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "interpreter teardown ran" in run.stdout
