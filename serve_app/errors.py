"""The one error type a user mistake produces, before any resource is registered."""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A setting has a value this project refuses.

    The message always names the setting, shows the value it got and says what is allowed, so a
    user can fix the stack file without reading a traceback.
    """

    def __init__(self, setting: str, value: Any, allowed: str, why: str | None = None) -> None:
        self.setting = setting
        self.value = value
        self.allowed = allowed
        self.why = why
        message = f"{setting}: got {value!r}; allowed: {allowed}"
        if why:
            message += f" ({why})"
        super().__init__(message)
