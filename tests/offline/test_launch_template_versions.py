"""The offline mock cloud numbers a launch template's version by its content, as EC2 makes a new version
for any change of it: so a changed node boot shows as a new version the node group rolls out."""

from __future__ import annotations

from offline.mock_cloud import launch_template_version

TEMPLATE = {"userData": "IyEvYmluL2Jhc2g=", "metadataOptions": {"httpTokens": "required"},
            "tags": {"eks-pd-llm/node-role": "gpu-worker"}, "updateDefaultVersion": True}


def test_the_same_content_is_the_same_version_and_any_change_of_it_a_new_one():
    assert launch_template_version(TEMPLATE) == launch_template_version(dict(reversed(TEMPLATE.items())))
    assert launch_template_version({**TEMPLATE, "userData": "IyEvYmluL3No"}) != launch_template_version(TEMPLATE)
    assert launch_template_version({**TEMPLATE, "description": "other"}) != launch_template_version(TEMPLATE)


def test_tags_and_the_default_version_setting_are_not_part_of_a_version():
    assert launch_template_version({**TEMPLATE, "tags": {"team": "ml"}}) == launch_template_version(TEMPLATE)
    assert launch_template_version({**TEMPLATE, "updateDefaultVersion": False}) == launch_template_version(TEMPLATE)
