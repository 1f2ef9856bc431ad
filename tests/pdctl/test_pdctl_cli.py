"""The CLI as a process: light start-up, and `connect`'s kubectl command line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from pdctl.cli import app

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("pulumi", "pulumi_aws", "pulumi_eks", "kubernetes", "openai", "ray", "vllm", "torch")


def test_help_starts_without_heavy_dependencies():
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['pdctl', '--help']\n"
        "try:\n    runpy.run_module('pdctl', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=True)
    assert "plan" in result.stdout and "bench" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


def _fake_kubectl(directory: Path) -> Path:
    script = directory / "kubectl"
    # Records its arguments and, when given one, the kubeconfig's content and file mode.
    script.write_text('#!/bin/sh\nhere="$(dirname "$0")"\nprintf "%s\\n" "$@" > "$here/kubectl-args"\n'
                      'if [ "$8" = --kubeconfig ]; then cp "$9" "$here/kubeconfig-seen"; '
                      'stat -c %a "$9" > "$here/kubeconfig-mode"; fi\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return directory / "kubectl-args"


def test_connect_port_forwards_the_serve_service(tmp_path, monkeypatch):
    args_file = _fake_kubectl(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = CliRunner().invoke(app, ["connect", "--namespace", "llm", "--name", "chat",
                                      "--local-port", "18000", "--kubeconfig", "/k/config"])
    assert result.exit_code == 0, result.output
    assert args_file.read_text().split() == [
        "port-forward", "--address", "127.0.0.1", "-n", "llm", "svc/chat-serve-svc", "18000:8000",
        "--kubeconfig", "/k/config"]


def test_connect_takes_target_and_kubeconfig_from_stack_outputs(tmp_path, monkeypatch):
    args_file = _fake_kubectl(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": []}
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"namespace": "inference", "rayServiceName": "ray-llm",
                                   "kubeconfig": kubeconfig}))
    result = CliRunner().invoke(app, ["connect", "--from-file", str(outputs)])
    assert result.exit_code == 0, result.output
    args = args_file.read_text().split()
    assert args[:7] == ["port-forward", "--address", "127.0.0.1", "-n", "inference",
                        "svc/ray-llm-serve-svc", "8000:8000"]
    # The secret kubeconfig went to a private (0600) temporary file, gone after kubectl exits.
    assert args[7] == "--kubeconfig" and not Path(args[8]).exists()
    assert json.loads((tmp_path / "kubeconfig-seen").read_text()) == kubeconfig
    assert (tmp_path / "kubeconfig-mode").read_text().strip() == "600"


def test_connect_without_kubectl_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(app, ["connect"])
    assert result.exit_code == 1
    assert "kubectl is not on PATH" in result.stderr


def test_each_flag_means_one_thing_in_every_command():
    """`-n` was the namespace in one command and the request count in another: a flag now binds one
    parameter across all commands."""
    import typer.main

    meanings: dict[str, set[str]] = {}
    for command in typer.main.get_command(app).commands.values():
        for param in command.params:
            for flag in [*param.opts, *param.secondary_opts]:
                meanings.setdefault(flag, set()).add(param.name)
    assert {flag: names for flag, names in meanings.items() if len(names) > 1} == {}
    assert meanings["-n"] == {"namespace"} and meanings["-s"] == {"stack"} and meanings["-o"] == {"output"}


def test_connect_help_is_help_not_design_notes():
    result = CliRunner().invoke(app, ["connect", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Forward 127.0.0.1:<local-port> to the stack's serve Service" in result.stdout
    assert "re-implement" not in result.stdout and "portforward only reaches a pod" not in result.stdout


def test_connect_says_what_to_check_when_kubectl_fails(tmp_path, monkeypatch):
    script = tmp_path / "kubectl"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = CliRunner().invoke(app, ["connect", "--namespace", "llm", "--name", "chat", "--kubeconfig", "/k/config"])
    assert result.exit_code == 1
    assert "kubectl port-forward exited 1: `pdctl status` shows" in result.stderr
