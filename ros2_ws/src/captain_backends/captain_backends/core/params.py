"""Parameter schemas: type, default, unit, valid range and meaning, declared in one place.

Each node's parameters are a tuple of ``ParamSpec``. The same schema validates YAML
files (``validate``), declares ROS 2 parameters with descriptors and ranges (the nodes),
and documents them (``describe``). ROS-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from captain_backends.core.errors import BackendError


class ParameterError(BackendError):
    """A parameter value is missing, of the wrong type, or out of range."""


@dataclass(frozen=True)
class ParamSpec:
    """One parameter.

    Attributes:
        name: ROS parameter name (dots allowed for groups, e.g. ``motion.speed_m_s``).
        type: ``bool``, ``int``, ``float``, ``str`` or ``list``.
        default: the value used when the YAML does not set it.
        description: what it does, with its frame where relevant.
        unit: SI unit (``m``, ``s``, ``N``, ``rad``, ``Hz``) or ``""``.
        min_value / max_value: inclusive range for numbers (None: unbounded).
        choices: the allowed values for strings (empty: any).
    """

    name: str
    type: type
    default: Any
    description: str
    unit: str = ""
    min_value: float | None = None
    max_value: float | None = None
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        """Return ``value`` converted to the parameter's type, or raise ParameterError."""
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if self.type is list and isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise ParameterError(
                f"parameter {self.name!r} must be {self.type.__name__}, got {type(value).__name__} {value!r}")
        if self.type in (int, float):
            if self.min_value is not None and value < self.min_value:
                raise ParameterError(
                    f"parameter {self.name!r} = {value} {self.unit} is below its minimum {self.min_value}")
            if self.max_value is not None and value > self.max_value:
                raise ParameterError(
                    f"parameter {self.name!r} = {value} {self.unit} is above its maximum {self.max_value}")
        if self.choices and value not in self.choices:
            raise ParameterError(
                f"parameter {self.name!r} = {value!r} is not one of: {', '.join(self.choices)}")
        return value


def validate(schema: Iterable[ParamSpec], values: Mapping[str, Any], *, node: str = "") -> dict[str, Any]:
    """Defaults overlaid by ``values``, every value checked. Unknown names are errors that
    list the known ones."""
    specs = {s.name: s for s in schema}
    unknown = sorted(set(values) - set(specs))
    if unknown:
        where = f" of node {node!r}" if node else ""
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}{where}; known: {', '.join(sorted(specs))}")
    out = {name: spec.default for name, spec in specs.items()}
    for name, value in values.items():
        out[name] = specs[name].check(value)
    return out


def describe(schema: Iterable[ParamSpec]) -> str:
    """A Markdown table of the schema (for docs and `--help`)."""
    rows = ["| name | type | default | unit | range | description |", "|---|---|---|---|---|---|"]
    for s in schema:
        rng = ", ".join(s.choices) if s.choices else (
            f"[{'' if s.min_value is None else s.min_value}, {'' if s.max_value is None else s.max_value}]"
            if s.type in (int, float) else "")
        rows.append(f"| `{s.name}` | {s.type.__name__} | `{s.default!r}` | {s.unit} | {rng} | {s.description} |")
    return "\n".join(rows)
