"""The one error type a user mistake produces, before any resource is registered."""

from __future__ import annotations

import difflib
from typing import Any


class ConfigError(ValueError):
    """A setting has a value this project refuses.

    The message always names the setting, shows the value it got and says what is allowed, so a
    user can fix the stack file without reading a traceback.
    """

    def __init__(self, setting: str, value: Any, allowed: str, why: str | None = None, *,
                 message: str | None = None) -> None:
        self.setting = setting
        self.value = value
        self.allowed = allowed
        self.why = why
        if message is None:
            message = f"{setting}: got {value!r}; allowed: {allowed}"
            if why:
                message += f" ({why})"
        super().__init__(message)


def unknown_setting(name: str, value: Any, known: list[str], *, what: str = "setting", where: str = "") -> ConfigError:
    """A key nobody reads (a typo): the hint first, and never the whole list of keys."""
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean `{close[0]}`?" if close else "delete it, or check the spelling against Pulumi.yaml"
    return ConfigError(name, value, f"one of {len(known)} known keys", hint,
                       message=f"unknown {what} `{name}`{where}: {hint}")
