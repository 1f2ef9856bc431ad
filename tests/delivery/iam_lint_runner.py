"""Run parliament (the offline IAM policy linter) on policy documents; run by .venv-checkov's Python.

    python iam_lint_runner.py DOCUMENTS.json   → JSON list of findings on stdout

DOCUMENTS.json maps a document's name to the policy document. Community auditors included
(privilege escalation, permissions management, credentials exposure, sensitive access). This file
imports parliament only: it runs in the checkov environment, not the project's.
"""

import json
import sys
import warnings

warnings.simplefilter("ignore")  # parliament imports pkg_resources, which warns that it is deprecated

from parliament import analyze_policy_string  # noqa: E402


def main() -> None:
    with open(sys.argv[1]) as handle:
        documents = json.load(handle)
    found = []
    for name, document in sorted(documents.items()):
        policy = analyze_policy_string(json.dumps(document), include_community_auditors=True)
        for finding in policy.findings:
            # Community auditors put what they found (the actions) in the location, not the detail.
            actions = finding.location.get("actions") if isinstance(finding.location, dict) else None
            found.append({"document": name, "issue": finding.issue, "severity": finding.severity,
                          "detail": str(finding.detail or sorted(actions or []))[:400]})
    json.dump(found, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
