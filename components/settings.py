"""Compatibility names for the two callers still reading the old module (components/cold_start.py,
lab/stack.py); the configuration layer is components/config/. Delete once they import from there."""

from components.config.declared import project_name
from components.config.read import read_config
from components.config.serving import ServingSettings

__all__ = ["ServingSettings", "project_name", "read_config"]
