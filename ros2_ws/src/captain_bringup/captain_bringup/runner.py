"""``captain bringup``: the nodes of a stack, with the same parameters, as ``ros2 launch``
starts them.

Where ``ros2 launch`` is not installed, ``captain bringup <stack>`` runs exactly the
nodes the launch files start (``core.stack.stack_nodes``, the one description both read)
with exactly their parameters (``config/captain.yaml`` + ``config/<stack>.yaml``,
merged as ``ros2 launch`` applies them). Parameters reach the nodes the way they reach a
launched node: ``--ros-args --params-file <merged> -r __ns:=<namespace>``, the merged
file keyed ``/**/<node>`` so it matches in any namespace. Values are checked against
each node's schema first (a typo or an out-of-range value stops the bringup with a
message naming it).

``run_processes`` (the default): one OS process per node group
(``core.stack.process_groups``, hosted by ``captain_bringup.group_host``), supervised by
``core.processes.Supervisor``: children's lines echoed with their group's name, a
``READY`` line once every group is up, a crashed group reported (and respawned where the
description says so), SIGINT/SIGTERM stop the groups in reverse order, exit 0.

``run`` (``--in-process``, for debugging with one interpreter): every node in this
process, each on its own executor, the same READY line and stop.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from captain_backends.core.params import ParamSpec, validate
from captain_bringup.core.stack import NodeSpec, StackError, load_params, stack_nodes


def load_object(reference: str) -> Any:
    """The object named by ``"module:attribute"``."""
    module, _, attr = reference.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise StackError(f"cannot load {reference!r}: {exc}") from exc


def node_schema(spec: NodeSpec) -> tuple[ParamSpec, ...] | None:
    """The node's parameter schema, or None when it declares none."""
    return tuple(load_object(spec.schema)) if spec.schema else None


#: Parameters every rclpy node declares itself, outside the nodes' schemas: name -> type.
#: ``use_sim_time``: the node's clock follows ``/clock`` (rclpy's ``TimeSource``).
ROS_BUILTIN_PARAMS: dict[str, type] = {"use_sim_time": bool}


def _builtin_params(node: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The ROS built-in parameters among ``values``, type-checked.

    Raises:
        StackError: a value of the wrong type (e.g. ``use_sim_time: "yes"``).
    """
    out = {}
    for name, kind in ROS_BUILTIN_PARAMS.items():
        if name in values:
            value = values[name]
            if not isinstance(value, kind):
                raise StackError(f"{node}.{name} must be a {kind.__name__} (true or false), not {value!r}")
            out[name] = value
    return out


def stack_params(stack: str, *, config_dir: Path | None = None, extra_files: list[Path] | None = None,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The checked parameters of every node of ``stack``: YAML files merged, ``overrides``
    (``{node: {name: value}}``) on top, each node's values validated by its schema
    (numbers converted to the declared type). Nodes without a schema keep their values.
    The ROS built-ins of ``ROS_BUILTIN_PARAMS`` (``use_sim_time``) are accepted for every
    node and type-checked.

    Raises:
        StackError / ParameterError: unknown node or parameter, wrong type, out of range.
    """
    merged = load_params(stack, config_dir, extra_files)
    for node, values in (overrides or {}).items():
        if node not in merged:
            raise StackError(f"override for unknown node {node!r}; nodes of {stack}: {', '.join(sorted(merged))}")
        merged[node].update(values)
    out: dict[str, dict[str, Any]] = {}
    for spec in stack_nodes(stack):
        schema = node_schema(spec)
        values = merged.get(spec.name, {})
        builtin = _builtin_params(spec.name, values)
        values = {k: v for k, v in values.items() if k not in builtin}
        out[spec.name] = {**(dict(values) if schema is None else {
            k: v for k, v in validate(schema, values, node=spec.name).items() if k in values}), **builtin}
    return out


def write_params_file(params: Mapping[str, Mapping[str, Any]], directory: Path) -> Path:
    """A ROS 2 parameter file with one ``/**/<node>`` entry per node."""
    path = Path(directory) / "captain_bringup_params.yaml"
    data = {f"/**/{node}": {"ros__parameters": dict(values)} for node, values in params.items() if values}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def ros_arguments(params_file: Path, namespace: str = "") -> list[str]:
    """The command line a launched node would get: ``--ros-args --params-file ... [-r __ns:=...]``."""
    args = ["captain_bringup", "--ros-args", "--params-file", str(params_file)]
    if namespace:
        args += ["-r", f"__ns:=/{namespace.strip('/')}"]
    return args


def node_builder(spec: NodeSpec) -> Callable[[], Any]:
    """A zero-argument builder of the node of ``spec`` named ``spec.name``."""
    factory = load_object(spec.factory)
    try:
        takes_name = "node_name" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_name = False
    return (lambda: factory(node_name=spec.name)) if takes_name else factory


def run(stack: str, *, namespace: str = "", config_dir: Path | None = None, extra_files: list[Path] | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None, ready_timeout_s: float = 300.0) -> int:
    """Host the nodes of ``stack`` until SIGINT/SIGTERM; returns the exit code (0 after a
    clean stop, 1 when a node did not become ready in time)."""
    from captain_harness.nodes.hosting import run_nodes

    specs = stack_nodes(stack)
    params = stack_params(stack, config_dir=config_dir, extra_files=extra_files, overrides=overrides)
    builders = [node_builder(spec) for spec in specs]
    with tempfile.TemporaryDirectory(prefix="captain_bringup_") as tmp:
        args = ros_arguments(write_params_file(params, Path(tmp)), namespace)
        where = f" in /{namespace.strip('/')}" if namespace else ""
        return run_nodes(builders, args, label=f"captain bringup {stack}{where}: {', '.join(s.name for s in specs)}",
                         ready_timeout_s=ready_timeout_s)


def run_processes(stack: str, *, namespace: str = "", config_dir: Path | None = None,
                  extra_files: list[Path] | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None,
                  ready_timeout_s: float = 300.0, stop_timeout_s: float = 15.0) -> int:
    """Run each node group of ``stack`` in a process of its own until SIGINT/SIGTERM;
    returns the exit code (0 after a clean stop; 1 when a group was not ready in time,
    exited before it was ready, or exited later without respawn)."""
    from captain_bringup.core.processes import ChildSpec, Supervisor
    from captain_bringup.core.stack import process_groups

    groups = process_groups(stack)
    params = stack_params(stack, config_dir=config_dir, extra_files=extra_files, overrides=overrides)
    for specs in groups.values():  # an unknown factory fails here, before any process starts
        for spec in specs:
            load_object(spec.factory)
    with tempfile.TemporaryDirectory(prefix="captain_bringup_") as tmp:
        ros_args = ros_arguments(write_params_file(params, Path(tmp)), namespace)[1:]
        children = [
            ChildSpec(name=group, respawn=specs[0].respawn, respawn_delay_s=specs[0].respawn_delay_s,
                      argv=(sys.executable, "-m", "captain_bringup.group_host", stack, group,
                            "--ready-timeout-s", f"{ready_timeout_s + 60.0:g}", *ros_args))
            for group, specs in groups.items()]
        where = f" in /{namespace.strip('/')}" if namespace else ""
        names = ", ".join(s.name for specs in groups.values() for s in specs)
        supervisor = Supervisor(children, label=f"captain bringup {stack}{where}: {names}",
                                stop_timeout_s=stop_timeout_s)
        return supervisor.run(ready_timeout_s=ready_timeout_s)
