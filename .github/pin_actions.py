"""Pin every third-party action in .github/ to the commit of a release tag, the tag in a comment.

    python .github/pin_actions.py            # newest release of each action's pinned major version
    python .github/pin_actions.py --check    # exit 1 if a pin is not that (CI or a weekly job)
    python .github/pin_actions.py --major    # also move to the newest major (read its changelog first)

A line `uses: owner/repo@<40-hex sha>  # v4.4.0` is what zizmor's unpinned-uses audit wants and what
a reviewer can read; a tag (`@v4`) can be moved by whoever controls the action's repository, a
commit cannot. Tags are resolved with `git ls-remote --tags https://github.com/<owner>/<repo>`, so
this needs GitHub; annotated tags are peeled to their commit. Only release tags `vX`, `vX.Y` and
`vX.Y.Z` are considered. Local actions and reusable workflows (`$/…`, `./…`) are left alone.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

GITHUB_DIR = Path(__file__).resolve().parent
USES = re.compile(
    r"(?P<lead>\buses:\s*)(?P<action>[\w.-]+/[\w.-]+)(?P<path>/[^@\s]*)?@(?P<ref>[^\s#]+)(?P<comment>[ \t]*#[^\n]*)?")
RELEASE_TAG = re.compile(r"v(\d+)(?:\.(\d+))?(?:\.(\d+))?")
SHA = re.compile(r"[0-9a-f]{40}")


def release_commits(ls_remote: str) -> dict[str, str]:
    """Release tag → commit, from `git ls-remote --tags` output (annotated tags peeled via `^{}`)."""
    found: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in ls_remote.splitlines():
        parts = line.split()
        if len(parts) != 2 or not parts[1].startswith("refs/tags/"):
            continue
        sha, tag = parts[0], parts[1].removeprefix("refs/tags/")
        if tag.endswith("^{}"):
            peeled[tag[:-3]] = sha
        elif RELEASE_TAG.fullmatch(tag):
            found[tag] = sha
    return {tag: peeled.get(tag, sha) for tag, sha in found.items()}


def version_key(tag: str) -> tuple[int, int, int]:
    major, minor, patch = RELEASE_TAG.fullmatch(tag).groups()
    return int(major), int(minor or 0), int(patch or 0)


def newest_release(commits: dict[str, str], major: int | None) -> str:
    """The newest full `vX.Y.Z` tag (of `major`, if given); a bare `vX` only when no X.Y.Z exists."""
    tags = [t for t in commits if major is None or version_key(t)[0] == major]
    if not tags:
        raise LookupError(f"no release tag of major {major}")
    full = [t for t in tags if t.count(".") == 2]
    return max(full or tags, key=lambda t: (version_key(t), t.count(".")))


def pinned_major(ref: str, comment: str | None) -> int | None:
    """The major version a `uses:` is on: from its tag ref, else from its `# vX.Y.Z` comment."""
    for text in (ref, (comment or "").lstrip(" \t#").split(" ")[0]):
        match = RELEASE_TAG.fullmatch(text)
        if match:
            return int(match.group(1))
    return None


def repin(text: str, resolve: Callable[[str], dict[str, str]], *, any_major: bool = False) -> tuple[str, list[str]]:
    """`text` with every third-party `uses:` pinned to `@<commit>  # <tag>`; and what changed."""
    changes: list[str] = []

    def pin(match: re.Match) -> str:
        action, ref, comment = match["action"], match["ref"], match["comment"]
        major = None if any_major else pinned_major(ref, comment)
        if major is None and not any_major:
            raise LookupError(f"{action}@{ref}: no version to stay within; add a '# vX.Y.Z' comment or use --major")
        commits = resolve(action)
        tag = newest_release(commits, major)
        pinned = f"{match['lead']}{action}{match['path'] or ''}@{commits[tag]}  # {tag}"
        if pinned != match.group(0):
            changes.append(f"{action}: {ref}{comment or ''} -> {commits[tag]} # {tag}")
        return pinned

    return USES.sub(pin, text), changes


def ls_remote(action: str) -> dict[str, str]:
    done = subprocess.run(["git", "ls-remote", "--tags", f"https://github.com/{action}"],
                          capture_output=True, text=True, timeout=60, check=True)
    return release_commits(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a pin would change")
    parser.add_argument("--major", action="store_true", help="move to the newest major version too")
    args = parser.parse_args(argv)
    cache: dict[str, dict[str, str]] = {}

    def resolve(action: str) -> dict[str, str]:
        if action not in cache:
            cache[action] = ls_remote(action)
        return cache[action]

    stale = False
    for path in sorted(GITHUB_DIR.rglob("*.yml")):
        text = path.read_text()
        new, changes = repin(text, resolve, any_major=args.major)
        for change in changes:
            print(f"{path.relative_to(GITHUB_DIR.parent)}: {change}")
        if changes and not args.check:
            path.write_text(new)
        stale |= bool(changes)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
