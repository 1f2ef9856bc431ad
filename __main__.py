"""The Pulumi program: validated settings in, the whole PD serving stack out.

Everything is checked (`load_settings`) before the first resource is registered; the Hugging Face
token is only ever handled as a Pulumi secret.
"""

import pulumi

from components.config.front_door import API_KEYS_KEY
from components.config.runtime import load_settings
from components.config.stack import HF_TOKEN_KEY
from components.stack import build_stack

settings = load_settings()
for warning in settings.warnings:  # what the preview could not check (e.g. model facts it could not read)
    pulumi.log.warn(warning)
hf_token = pulumi.Config().get_secret(HF_TOKEN_KEY) if settings.hf_token_configured else None
api_keys = pulumi.Config().get_secret(API_KEYS_KEY) if settings.front_door.key_names else None
stack = build_stack(settings, hf_token, api_keys)
for name, value in stack.outputs.items():
    pulumi.export(name, value)
