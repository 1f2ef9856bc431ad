"""The offline plan diff of a pull request, as a comment on it: forks included, no cloud credentials.

Two halves, in two workflows, because the code that runs the pull request's program must never hold
a token that can write:

- `collect` runs in pull-request.yml's `plan` job (event `pull_request`, read-only token, no
  secrets, the pull request's own code): for every stack, the change's `pdctl update-check` (the
  stack as each release stacks run today deployed it, updated by this change: what state it would
  lose, which nodes roll), the base branch's `pdctl plan -o json` and the change's `pdctl plan --diff`
  of it, saved with the exit codes as the `plan-diff` artifact.
- `post` runs in plan-comment.yml (event `workflow_run`, the default branch's code only, a token
  that may write pull-request comments): it downloads that artifact and treats every byte of it as
  untrusted data. The pull-request number is believed only if GitHub says that pull request's head is
  the commit the plan job ran on; the texts go inside a code fence longer than any backtick run in
  them, cut to GitHub's comment size; one comment per pull request is created, then edited.

Standard library only: the `post` side installs nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

ARTIFACT = "plan-diff"
META = "meta.json"
MARKER = "<!-- pdctl-plan-diff -->"
BOT_LOGIN = "github-actions[bot]"
STACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SHA = re.compile(r"^[0-9a-f]{40}$")
COMMENT_LIMIT = 65_536  # GitHub refuses longer comment bodies
MEMBER_LIMIT = 1_000_000  # bytes read of any one artifact file
EXIT_NO_CHANGE, EXIT_CHANGED = 0, 3  # pdctl plan --diff (pdctl/plan_diff.py)
EXIT_UPDATE_PASSES, EXIT_UPDATE_REFUSED = 0, 4  # pdctl update-check (pdctl/release_update.py)


# ------------------------------------------------------------------------------ collect

def _pdctl(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


def collect(base: Path, head: Path, out: Path, pr_number: int, head_sha: str,
            stacks: list[str] | None = None) -> dict:
    """Update check, base plan and diff per stack (default: every Pulumi.<stack>.yaml of `head`) into
    `out` (the artifact), with `meta.json`."""
    out.mkdir(parents=True, exist_ok=True)
    if stacks is None:
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in head.glob("Pulumi.*.yaml"))
    results: dict[str, dict] = {}
    for stack in stacks:
        check = _pdctl(["update-check", "--stack", stack], head)
        (out / f"{stack}-update.txt").write_text(check.stdout + (f"\n{check.stderr}" if check.stderr.strip() else ""))
        base_plan = out / f"base-{stack}.json"
        made = _pdctl(["plan", "--stack", stack, "--output", "json"], base)
        if made.returncode != 0:
            text = (f"no base plan for stack {stack}: the base branch's `pdctl plan` exited {made.returncode}\n"
                    f"{made.stderr.strip()}\n")
            (out / f"{stack}.txt").write_text(text)
            results[stack] = {"exit": None, "update_exit": check.returncode}
            continue
        base_plan.write_text(made.stdout)
        diff = _pdctl(["plan", "--stack", stack, "--diff", str(base_plan.resolve())], head)
        (out / f"{stack}.txt").write_text(diff.stdout + (f"\n{diff.stderr}" if diff.stderr.strip() else ""))
        results[stack] = {"exit": diff.returncode, "update_exit": check.returncode}
    meta = {"pr_number": pr_number, "head_sha": head_sha, "stacks": results}
    (out / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# --------------------------------------------------------------------------------- post

class GitHub:
    """The few REST calls `post` makes, with the job's token."""

    def __init__(self, api_url: str, repository: str, token: str):
        self.api, self.repo, self.token = api_url.rstrip("/"), repository, token

    def request(self, method: str, path: str, body: dict | None = None) -> bytes:
        url = path if path.startswith("http") else f"{self.api}{path}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        # Not forwarded on a redirect: an artifact download redirects to pre-signed storage.
        req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/vnd.github+json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.read()

    def json(self, method: str, path: str, body: dict | None = None):
        return json.loads(self.request(method, path, body) or b"null")


def read_artifact(github: GitHub, run_id: int) -> dict[str, str]:
    """{file name: text} of the run's plan-diff artifact, read in memory (never extracted to disk)."""
    listing = github.json("GET", f"/repos/{github.repo}/actions/runs/{run_id}/artifacts?per_page=100")
    found = [a for a in listing.get("artifacts", []) if a.get("name") == ARTIFACT and not a.get("expired")]
    if not found:
        raise LookupError(f"run {run_id} has no {ARTIFACT} artifact")
    archive = zipfile.ZipFile(io.BytesIO(github.request("GET", found[0]["archive_download_url"])))
    files = {}
    for info in archive.infolist():
        name = info.filename
        if "/" in name or name.startswith(".") or info.file_size > MEMBER_LIMIT:
            continue  # only the flat files collect writes
        with archive.open(info) as member:
            files[name] = member.read(MEMBER_LIMIT).decode("utf-8", errors="replace")
    return files


def fence_for(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _status(exit_code, known: dict[int, str], missing: str) -> str:
    if exit_code in known:
        return known[exit_code]
    return missing if exit_code is None else f"pdctl failed (exit {int(exit_code)})"


def status_of(exit_code) -> str:
    return _status(exit_code, {EXIT_NO_CHANGE: "no change", EXIT_CHANGED: "changes"}, "no diff (see below)")


def update_status_of(exit_code) -> str:
    return _status(exit_code, {EXIT_UPDATE_PASSES: "passes", EXIT_UPDATE_REFUSED: (
        "**refused**: it loses state no entry of pdctl/intended_replacements.yaml declares")},
        "did not run (see below)")


def _exit(info: dict, key: str) -> int | None:
    value = info.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fenced(title: str, text: str, budget: int, is_open: bool) -> list[str]:
    if len(text) > budget:
        text = text[:budget] + "\n… cut to fit a GitHub comment; the whole text is in the run's artifact\n"
    fence = fence_for(text)
    return ["", f"<details{' open' if is_open else ''}><summary>{title}</summary>", "",
            f"{fence}text", text.rstrip("\n"), fence, "", "</details>"]


def comment_body(meta: dict, files: dict[str, str], run_url: str) -> str:
    """The comment, led by the update check's verdict per stack: only trusted words outside the fences;
    each stack's texts inside their own fences."""
    stacks = {name: info for name, info in sorted((meta.get("stacks") or {}).items())
              if STACK_NAME.match(name) and isinstance(info, dict)}
    header = [MARKER, "### Update check (`pdctl update-check`)", "",
              "Each stack as the releases stacks run today deployed it, updated by this pull request: state "
              "it would lose (a replaced or deleted cluster, node group, KMS key or store), node groups whose "
              "nodes roll, with their extra quota and minutes.", ""]
    header += [f"- **{name}**: {update_status_of(_exit(info, 'update_exit'))}" for name, info in stacks.items()]
    header += ["", "### Offline plan diff (`pdctl plan --diff`)", "",
               "What this pull request changes in each stack, planned offline against the base branch: no "
               f"cloud credentials involved, so forks get it too. [Workflow run]({run_url}).", ""]
    header += [f"- **{name}**: {status_of(_exit(info, 'exit'))}" for name, info in stacks.items()]
    budget = (COMMENT_LIMIT - 3_000 - sum(len(line) + 1 for line in header)) // max(1, 2 * len(stacks))
    sections = []
    for name, info in stacks.items():
        update = files.get(f"{name}-update.txt", "(no update check text in the artifact)\n")
        sections += _fenced(f"{name}: update check", update, budget, _exit(info, "update_exit") != EXIT_UPDATE_PASSES)
    for name in stacks:
        text = files.get(f"{name}.txt", "(no diff text in the artifact)\n")
        sections += _fenced(name, text, budget, len(stacks) <= 2)
    return "\n".join(header + sections) + "\n"


def post(github: GitHub, run_id: int, head_sha: str, run_url: str) -> str:
    """Create or edit the pull request's plan-diff comment; returns what it did."""
    if not SHA.match(head_sha):
        raise ValueError(f"head sha {head_sha!r} is not a commit id")
    files = read_artifact(github, run_id)
    meta = json.loads(files.get(META, "{}"))
    number = meta.get("pr_number")
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise ValueError(f"artifact names no pull request ({number!r})")
    pull = github.json("GET", f"/repos/{github.repo}/pulls/{number}")
    if (pull.get("head") or {}).get("sha") != head_sha:
        return f"skipped: pull request #{number} is not at {head_sha} (a newer push, or not its run)"
    body = comment_body(meta, files, run_url)
    page, existing = 1, None
    while existing is None:
        comments = github.json("GET", f"/repos/{github.repo}/issues/{number}/comments?per_page=100&page={page}")
        if not comments:
            break
        existing = next((c for c in comments if (c.get("user") or {}).get("login") == BOT_LOGIN
                         and str(c.get("body", "")).startswith(MARKER)), None)
        page += 1
    if existing is not None:
        github.json("PATCH", f"/repos/{github.repo}/issues/comments/{existing['id']}", {"body": body})
        return f"edited the plan-diff comment on #{number}"
    github.json("POST", f"/repos/{github.repo}/issues/{number}/comments", {"body": body})
    return f"commented on #{number}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="plan the base branch, diff the change, write the artifact folder")
    c.add_argument("--base", type=Path, required=True)
    c.add_argument("--head", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--pr-number", type=int, required=True)
    c.add_argument("--head-sha", required=True)
    sub.add_parser("post", help="post the artifact of $RUN_ID as a comment (GITHUB_TOKEN, REPO, HEAD_SHA, API_URL)")
    args = parser.parse_args(argv)
    if args.command == "collect":
        meta = collect(args.base, args.head, args.out, args.pr_number, args.head_sha)
        print(json.dumps(meta, indent=2))
        return 0
    env = os.environ
    github = GitHub(env.get("API_URL", "https://api.github.com"), env["REPO"], env["GITHUB_TOKEN"])
    try:
        print(post(github, int(env["RUN_ID"]), env["HEAD_SHA"], env.get("RUN_URL", "")))
    except (LookupError, ValueError, urllib.error.HTTPError) as exc:
        print(f"no comment: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
