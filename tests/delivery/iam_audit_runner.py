"""Run cloudsplaining's least-privilege audit on policy documents; run by .venv-iam's Python.

    python iam_audit_runner.py DOCUMENTS.json   → JSON list of findings on stdout

DOCUMENTS.json maps a document's name to the policy document. Each finding names cloudsplaining's
risk (privilege escalation, resource exposure, credentials exposure, data exfiltration) and what it
found (an escalation method, or an action). Statements narrowed by a resource ARN or a condition are
audited too (cloudsplaining's flag_conditional_statements and flag_resource_arn_statements), so a
narrowing is never what makes a finding go away. This file imports cloudsplaining only: it runs in
.venv-iam, not the project's environment.
"""

import json
import sys

from cloudsplaining.scan.policy_document import PolicyDocument


def main() -> None:
    with open(sys.argv[1]) as handle:
        documents = json.load(handle)
    found = []
    for name, document in sorted(documents.items()):
        audited = PolicyDocument(document, flag_conditional_statements=True, flag_resource_arn_statements=True)
        risks = {
            "privilege escalation": [e["type"] for e in audited.allows_privilege_escalation],
            "resource exposure": audited.permissions_management_without_constraints,
            "credentials exposure": audited.credentials_exposure,
            "data exfiltration": audited.allows_data_exfiltration_actions,
        }
        found += [{"document": name, "risk": risk, "detail": detail}
                  for risk, details in risks.items() for detail in sorted(details)]
    json.dump(found, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
