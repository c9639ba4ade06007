"""Declare a ``ParamSpec`` schema as ROS 2 parameters with descriptors and ranges.

Every node of the stack declares its parameters through ``declare_schema``: the type,
description (with its unit), floating-point or integer range and string choices become
the ``ParameterDescriptor`` that ``ros2 param describe`` shows (read-only: the nodes read
their parameters once at start-up, so ``set_parameters`` refuses a change with a reason
instead of accepting and ignoring it; set them in the parameter files or with
``captain bringup --param``), and the values read back
are checked once more by the schema (so a YAML value out of range stops the node with a
message that names the parameter and its range).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.node import Node

from captain_backends.core.params import ParamSpec, validate

_TYPES = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
          float: ParameterType.PARAMETER_DOUBLE, str: ParameterType.PARAMETER_STRING}


def _array_type(default: list[Any]) -> int:
    if default and all(isinstance(x, str) for x in default):
        return ParameterType.PARAMETER_STRING_ARRAY
    if default and all(isinstance(x, bool) for x in default):
        return ParameterType.PARAMETER_BOOL_ARRAY
    if default and all(isinstance(x, int) and not isinstance(x, bool) for x in default):
        return ParameterType.PARAMETER_INTEGER_ARRAY
    return ParameterType.PARAMETER_DOUBLE_ARRAY


def descriptor(spec: ParamSpec) -> ParameterDescriptor:
    """The ROS parameter descriptor of one spec (type, description with unit, range)."""
    unit = f" [{spec.unit}]" if spec.unit else ""
    choices = f" (one of: {', '.join(spec.choices)})" if spec.choices else ""
    desc = ParameterDescriptor(
        name=spec.name,
        type=_array_type(spec.default) if spec.type is list else _TYPES[spec.type],
        description=f"{spec.description}{unit}{choices}",
        # read once at start-up: a later change would be accepted and ignored, so
        # set_parameters refuses it ("Trying to set a read-only parameter: <name>")
        read_only=True,
    )
    if spec.choices:
        desc.additional_constraints = "one of: " + ", ".join(spec.choices)
    if spec.type is float and (spec.min_value is not None or spec.max_value is not None):
        desc.floating_point_range = [FloatingPointRange(
            from_value=float(spec.min_value if spec.min_value is not None else -1e300),
            to_value=float(spec.max_value if spec.max_value is not None else 1e300), step=0.0)]
    if spec.type is int and (spec.min_value is not None or spec.max_value is not None):
        desc.integer_range = [IntegerRange(
            from_value=int(spec.min_value if spec.min_value is not None else -(2**63)),
            to_value=int(spec.max_value if spec.max_value is not None else 2**63 - 1), step=1)]
    return desc


def declare_schema(node: Node, schema: Iterable[ParamSpec]) -> dict[str, Any]:
    """Declare every parameter of ``schema`` on ``node``; returns the validated values
    (defaults overlaid by the node's parameter overrides / YAML)."""
    specs = tuple(schema)
    declared = node.declare_parameters("", [(s.name, s.default, descriptor(s)) for s in specs])
    values = {p.name: p.value for p in declared}
    for spec in specs:
        if spec.type is list and values[spec.name] is not None:
            values[spec.name] = list(values[spec.name])
    return validate(specs, values, node=node.get_name())


def camera_qos(name: str) -> Any:
    """The QoS of camera topics (image, depth and camera_info alike) by parameter value:
    ``sensor_data`` (best effort, keep last 5: rclpy's ``qos_profile_sensor_data``; RViz's
    Image and Camera displays then need their Reliability Policy set to Best Effort) or
    ``reliable`` (reliable, keep last 5: RViz's default subscription matches it)."""
    from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy, qos_profile_sensor_data

    if name == "sensor_data":
        return qos_profile_sensor_data
    if name == "reliable":
        return QoSProfile(depth=5, history=QoSHistoryPolicy.KEEP_LAST, reliability=QoSReliabilityPolicy.RELIABLE)
    raise ValueError(f"camera QoS must be sensor_data or reliable, not {name!r}")
