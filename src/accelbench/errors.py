"""Errors with one-line messages meant for the user (the CLI prints ``str(err)`` and exits 2)."""


class AccelbenchError(Exception):
    """Base class: the message is one line a user can act on."""


class ConfigError(AccelbenchError, ValueError):
    """A spec field has an invalid value. The message names the field and the allowed values."""

    def __init__(self, field: str, value: object, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"invalid {field} {value!r}: allowed {allowed}")


class UnknownModelError(AccelbenchError, ValueError):
    """The model name is not registered, not a timm model, and not an importable factory."""


class DataError(AccelbenchError, ValueError):
    """The data source cannot be read (missing path, no images, bad archive)."""


class MissingDependencyError(AccelbenchError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str):
        super().__init__(f"{package} is not installed: pip install 'accelbench[{extra}]'")
