"""Typed driver configurations: the keyword options a driver's constructor accepts.

Every driver declares its options as a frozen dataclass (``RobotDriver.config_type``).
``DriverConfig.from_options`` builds one from keyword options and refuses an unknown
name with the list of valid ones, or a value of the wrong type with the expected type,
so a typo in a launch file or a test never passes unnoticed::

    @dataclass(frozen=True)
    class MyArmConfig(DriverConfig):
        port: str = "/dev/ttyUSB0"
        control_period_s: float = 0.01

    class MyArmDriver(RobotDriver):
        config_type = MyArmConfig

        def __init__(self, config: MyArmConfig | None = None, **options: Any) -> None:
            super().__init__()
            self.config = MyArmConfig.resolve(config, options, driver="my_arm")

ROS-free.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from captain_backends.core.errors import BackendError


class DriverConfigError(BackendError):
    """A driver option is unknown or has the wrong type; the message lists the valid ones."""


C = TypeVar("C", bound="DriverConfig")


def config_fields(config_type: type) -> tuple[str, ...]:
    """The option names of a dataclass configuration type, in declaration order."""
    if not is_dataclass(config_type):
        raise TypeError(f"{config_type!r} is not a dataclass")
    return tuple(f.name for f in fields(config_type))


def check_option_names(options: Mapping[str, Any], valid: tuple[str, ...], *, driver: str) -> None:
    """Raise ``DriverConfigError`` naming the unknown options and listing the valid ones."""
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise DriverConfigError(
            f"unknown option(s) {', '.join(repr(u) for u in unknown)} of driver {driver!r}; "
            f"valid options: {', '.join(valid)}")


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint`` (plain types, ``X | None``, ``Any``)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is not None:  # e.g. tuple[str, ...], dict[str, Any]: check the container only
        return isinstance(value, origin)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


@dataclass(frozen=True)
class DriverConfig:
    """Base of the drivers' typed configurations (see the module docstring)."""

    @classmethod
    def from_options(cls: type[C], *, driver: str = "", **options: Any) -> C:
        """Build from keyword options.

        Raises:
            DriverConfigError: an unknown option (listing the valid ones) or a value
                whose type does not match the field's annotation.
        """
        name = driver or cls.__name__
        check_option_names(options, config_fields(cls), driver=name)
        hints = typing.get_type_hints(cls)
        for key, value in options.items():
            hint = hints.get(key, Any)
            if not _matches(value, hint):
                raise DriverConfigError(
                    f"option {key!r} of driver {name!r} must be {_type_name(hint)}, "
                    f"got {type(value).__name__} {value!r}")
            if hint in (float, float | None) and isinstance(value, int) and not isinstance(value, bool):
                options[key] = float(value)
        return cls(**options)

    @classmethod
    def resolve(cls: type[C], config: C | None, options: Mapping[str, Any], *, driver: str) -> C:
        """A constructor's configuration: ``config`` as given, or one built from
        ``options`` (never both).

        Raises:
            DriverConfigError: both given, or an invalid option.
        """
        if config is not None:
            if options:
                raise DriverConfigError(
                    f"pass either a {cls.__name__} or keyword options to the {driver!r} driver, not both")
            if not isinstance(config, cls):
                raise DriverConfigError(f"config of the {driver!r} driver must be a {cls.__name__}, "
                                        f"got {type(config).__name__}")
            return config
        return cls.from_options(driver=driver, **dict(options))


#: Paths may be given as strings or ``Path`` objects.
PathLike = str | Path
