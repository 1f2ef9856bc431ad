"""Settings models whose field aliases are the stack config keys a user writes.

A slice of the stack's configuration is a `StackKeyModel`: each field's alias is the key in
`Pulumi.<stack>.yaml` (`maxModelLen`), each field's description says what is allowed. `from_stack_keys`
validates a slice and turns the first pydantic error into a `ConfigError` naming that key, so the
user sees one line about their stack file, never a validation traceback.

A check names what it judges by a `StackField` (a model and one of its fields), never by a key
written as a string: `StackField.key` is the one place a field becomes the key a user writes, and
`StackField.refuse` the one place a refusal of it becomes a `ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from serve_app.errors import ConfigError

Model = TypeVar("Model", bound="StackKeyModel")


class StackKeyModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    @classmethod
    def key(cls, field: str) -> str:
        """The stack config key of `field`."""
        alias = cls.model_fields[field].alias
        assert alias is not None, f"{cls.__name__}.{field} has no stack key"
        return alias

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(cls.key(name) for name in cls.model_fields)

    @classmethod
    def field(cls, name: str) -> StackField:
        """Field `name` of this model, as a check names what it judges."""
        return StackField(cls, name)


@dataclass(frozen=True)
class StackField:
    """One field of a stack-key model: `model` the slice, `name` the field's Python name."""

    model: type[StackKeyModel]
    name: str

    def __post_init__(self) -> None:
        assert self.name in self.model.model_fields, f"{self.model.__name__} has no field {self.name}"

    @property
    def key(self) -> str:
        """The stack config key a user writes for this field."""
        return self.model.key(self.name)

    @property
    def allowed(self) -> str:
        """What the field's description says is allowed."""
        return self.model.model_fields[self.name].description or ""

    def refuse(self, value: Any, allowed: str | None = None, why: str | None = None) -> ConfigError:
        """The ConfigError refusing `value` of this field (`allowed` defaults to its description)."""
        return ConfigError(self.key, value, self.allowed if allowed is None else allowed, why)


def from_stack_keys(model: type[Model], values: Mapping[str, Any], texts: Mapping[str, Any]) -> Model:
    """Validate `model` from `values` (by stack key); `texts` are the values as the user wrote them,
    for the error message. A `ConfigError` raised by a validator passes through unchanged."""
    fields = {model.key(name): field for name, field in model.model_fields.items()}
    try:
        return model.model_validate({alias: values[alias] for alias in fields if alias in values})
    except ValidationError as error:
        first = error.errors()[0]
        original = (first.get("ctx") or {}).get("error")
        if isinstance(original, ConfigError):
            raise original from None
        setting = str(first["loc"][0]) if first["loc"] else next(iter(fields))
        field = fields.get(setting)
        raise ConfigError(setting, texts.get(setting, first.get("input")),
                          field.description if field is not None and field.description else first["msg"],
                          first["msg"].removeprefix("Value error, ")) from None
