""".github/scripts/plan_comment.py: the plan job's artifact, and the comment the privileged half posts
from it, against a local stand-in for GitHub's REST API that records every call."""

from __future__ import annotations

import io
import json
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAD_SHA = "a" * 40
REPOSITORY = "acme/eks-pd-llm"
TOKEN = "ghs_test_token_not_real"


def artifact_zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


class FakeGitHub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _GitHubHandler)
        self.pull_head = HEAD_SHA
        self.comments: list[dict] = []
        self.archive = artifact_zip({})
        self.calls: list[tuple[str, str, str | None]] = []  # method, path, Authorization header

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _GitHubHandler(BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes = b"", content_type="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, body, status=200):
        self._send(status, json.dumps(body).encode())

    def _record(self):
        self.server.calls.append((self.command, self.path, self.headers.get("Authorization")))

    def do_GET(self):
        self._record()
        url = urlparse(self.path)
        base = f"/repos/{REPOSITORY}"
        if url.path == f"{base}/actions/runs/77/artifacts":
            return self._json({"artifacts": [
                {"name": "something-else", "archive_download_url": f"{self.server.url}/nope"},
                {"name": "plan-diff", "expired": False, "archive_download_url": f"{self.server.url}/download/9"}]})
        if url.path == "/download/9":  # GitHub answers with a redirect to pre-signed storage
            return self._send(302, headers=[("Location", f"{self.server.url}/storage/blob.zip")])
        if url.path == "/storage/blob.zip":
            return self._send(200, self.server.archive, "application/zip")
        if url.path == f"{base}/pulls/5":
            return self._json({"number": 5, "head": {"sha": self.server.pull_head}})
        if url.path == f"{base}/issues/5/comments":
            page = int(dict(p.split("=") for p in url.query.split("&"))["page"])
            return self._json(self.server.comments if page == 1 else [])
        self._json({"message": "Not Found"}, 404)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_POST(self):
        self._record()
        if self.path == f"/repos/{REPOSITORY}/issues/5/comments":
            comment = {"id": 100 + len(self.server.comments), "user": {"login": "github-actions[bot]"}, **self._body()}
            self.server.comments.append(comment)
            return self._json(comment, 201)
        self._json({"message": "Not Found"}, 404)

    def do_PATCH(self):
        self._record()
        for comment in self.server.comments:
            if self.path == f"/repos/{REPOSITORY}/issues/comments/{comment['id']}":
                comment.update(self._body())
                return self._json(comment)
        self._json({"message": "Not Found"}, 404)


@pytest.fixture
def github(serve_http):
    return serve_http(FakeGitHub())


@pytest.fixture
def post(github, comment_script):
    def run(head_sha: str = HEAD_SHA) -> str:
        client = comment_script.GitHub(github.url, REPOSITORY, TOKEN)
        return comment_script.post(client, 77, head_sha, "https://github.com/acme/eks-pd-llm/actions/runs/77")

    return run


META = {"pr_number": 5, "head_sha": HEAD_SHA,
        "stacks": {"dev": {"exit": 3, "update_exit": 4}, "prod": {"exit": 0, "update_exit": 0}}}
DEV_DIFF = "plan diff: stack dev (base) → dev (this change)\nCHANGED: 1 to replace (62 resources unchanged)\n"


def test_posts_one_comment_then_edits_it(github, post, comment_script):
    github.archive = artifact_zip({"meta.json": json.dumps(META), "dev.txt": DEV_DIFF, "prod.txt": "no change\n"})
    assert post() == "commented on #5"
    [comment] = github.comments
    body = comment["body"]
    assert body.startswith(comment_script.MARKER)
    assert "- **dev**: changes" in body and "- **prod**: no change" in body
    assert f"```text\n{DEV_DIFF.rstrip()}\n```" in body
    # The update check's verdict leads, before the plan diff: dev's refusal first of all.
    lines = body.splitlines()
    assert lines[1] == "### Update check (`pdctl update-check`)"
    verdicts = [line for line in lines if line.startswith("- **")]
    assert verdicts[:2] == ["- **dev**: **refused**: it loses state no entry of pdctl/intended_replacements.yaml "
                            "declares", "- **prod**: passes"]
    # The next run edits the same comment instead of adding one.
    github.archive = artifact_zip({"meta.json": json.dumps(META), "dev.txt": "no change\n", "prod.txt": "no change\n"})
    assert post() == "edited the plan-diff comment on #5"
    assert len(github.comments) == 1 and "CHANGED" not in github.comments[0]["body"]


def test_the_token_never_follows_the_redirect_to_storage(github, post):
    github.archive = artifact_zip({"meta.json": json.dumps(META), "dev.txt": DEV_DIFF})
    post()
    auth = {path: header for _, path, header in github.calls}
    assert auth["/download/9"] == f"Bearer {TOKEN}"
    assert auth["/storage/blob.zip"] is None


def test_a_pr_number_github_does_not_confirm_is_not_commented_on(github, post):
    """A fork controls the artifact: it could name any pull request. Only the one whose head is the
    commit the plan ran on gets the comment."""
    github.pull_head = "b" * 40
    github.archive = artifact_zip({"meta.json": json.dumps(META), "dev.txt": DEV_DIFF})
    assert post().startswith("skipped: pull request #5 is not at")
    assert github.comments == []


@pytest.mark.parametrize("number", ["5", 5.0, True, -1, None])
def test_a_pr_number_that_is_not_a_positive_integer_is_refused(github, post, number):
    github.archive = artifact_zip({"meta.json": json.dumps({**META, "pr_number": number})})
    with pytest.raises(ValueError, match="artifact names no pull request"):
        post()
    assert github.comments == []


def test_artifact_text_cannot_break_out_of_its_fence_or_inject_markup(github, post):
    hostile = "````\n</details>\n@everyone [click](https://evil.example)\n```\n"
    meta = {**META, "stacks": {"dev": {"exit": 3}, "<img src=x>": {"exit": 3}}}
    github.archive = artifact_zip({"meta.json": json.dumps(meta), "dev.txt": hostile,
                                   "../escape.txt": "x", ".hidden": "y"})
    post()
    body = github.comments[0]["body"]
    fence = "`" * 5  # longer than the longest backtick run in the text
    start = body.index(f"{fence}text\n") + len(f"{fence}text\n")
    end = body.index(f"\n{fence}", start)
    assert body[start:end] == hostile.rstrip("\n")  # all of it inside one fence
    assert "<img" not in body  # a stack name that is not a name is dropped


def test_a_long_diff_is_cut_to_fit_a_comment(github, post, comment_script):
    github.archive = artifact_zip({"meta.json": json.dumps(META), "dev.txt": "x" * 200_000, "prod.txt": "ok\n"})
    post()
    body = github.comments[0]["body"]
    assert len(body) <= comment_script.COMMENT_LIMIT
    assert "cut to fit a GitHub comment" in body


def test_collect_plans_the_base_and_diffs_a_stack(tmp_path, comment_script):
    """The plan job's half, for real, on this repository as both base and head: no change."""
    meta = comment_script.collect(REPO, REPO, tmp_path, 5, HEAD_SHA, stacks=["dev"])
    assert meta == {"pr_number": 5, "head_sha": HEAD_SHA, "stacks": {"dev": {"exit": 0, "update_exit": 0}}}
    assert "no change" in (tmp_path / "dev.txt").read_text()
    assert (tmp_path / "dev-update.txt").read_text().startswith("update check, stack dev from release ")
    assert json.loads((tmp_path / "base-dev.json").read_text())["stack"] == "dev"
    assert json.loads((tmp_path / "meta.json").read_text()) == meta


def test_collect_finds_every_stack_and_reports_a_base_that_cannot_plan(tmp_path, comment_script, monkeypatch):
    calls = []

    def fake_pdctl(args, cwd):
        calls.append((args[:3], cwd))
        failing = cwd.name == "base" and "prod" in args
        return comment_script.subprocess.CompletedProcess(args, 2 if failing else 0, "{}" if not failing else "",
                                                          "stack 'prod': no file Pulumi.prod.yaml" if failing else "")

    monkeypatch.setattr(comment_script, "_pdctl", fake_pdctl)
    (tmp_path / "base").mkdir()
    meta = comment_script.collect(tmp_path / "base", REPO, tmp_path / "out", 5, HEAD_SHA)
    stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in REPO.glob("Pulumi.*.yaml"))
    assert sorted(meta["stacks"]) == stacks and meta["stacks"]["prod"] == {"exit": None, "update_exit": 0}
    assert "no base plan for stack prod" in (tmp_path / "out" / "prod.txt").read_text()
