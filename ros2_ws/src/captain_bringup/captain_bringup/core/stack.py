"""The one description of which nodes run in each bringup, read by both the launch files
(``launch/*.launch.py``, for ``ros2 launch`` on full ROS 2 installs) and ``captain
bringup`` (where ``ros2 launch`` is not installed).

Process model: every node belongs to a node group (``NodeSpec.group``, its own name
unless set); each group runs in an OS process of its own, as ``ros2 launch`` runs each
``Node`` action. A simulator or the robot's hardware side (the XR1 twin, fake hardware,
a camera simulator) never shares a group with the harness, whose driver's staleness
watchdog would otherwise judge its own process's scheduling. ``respawn`` says which
groups are started again when they exit (``launch_ros``'s ``respawn=True``).

Parameters come from ``config/captain.yaml`` (per node name, shared by every stack) and a
small overlay per stack (``config/<stack>.yaml``); later files win. ROS-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from captain_backends.core.errors import BackendError


def default_config_dir() -> Path:
    """``config/`` of the source tree (editable installs) or of the installed share dir."""
    source = Path(__file__).resolve().parents[2] / "config"
    if (source / "captain.yaml").exists():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("captain_bringup")) / "config"
    except (ImportError, LookupError) as exc:
        raise StackError(f"cannot find captain_bringup's config directory: {exc}") from exc



class StackError(BackendError):
    """An unknown stack or a malformed parameter file."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of a bringup.

    Attributes:
        name: node name; also its key in the parameter YAML files.
        package: the ament package that installs its executable.
        executable: the executable name for ``launch_ros.actions.Node``.
        factory: ``"module:callable"`` returning the rclpy Node for the in-process runner;
            called as ``factory(node_name=...)`` when it takes ``node_name`` (else with no
            arguments); parameters and namespace reach it as they reach a launched node,
            through ``--ros-args --params-file ... -r __ns:=...``.
        schema: ``"module:ATTRIBUTE"`` of the node's parameter schema (a tuple of
            ``ParamSpec``), or ``""`` for a node without one; the runner and the tests
            validate the YAML values against it.
        group: the node group (one OS process) it runs in; ``""`` = its own name.
        respawn: the group's process is started again when it exits.
        respawn_delay_s: wait before that restart, s.
    """

    name: str
    package: str
    executable: str
    factory: str
    schema: str = ""
    group: str = ""
    respawn: bool = False
    respawn_delay_s: float = 2.0

    @property
    def process_group(self) -> str:
        """The node group (OS process) this node runs in."""
        return self.group or self.name


HARNESS = NodeSpec("harness", "captain_harness", "harness_node",
                   "captain_harness.nodes.harness_node:HarnessNode",
                   "captain_harness.nodes.harness_params:SCHEMA")
# clients of the harness, stateless between calls: restarted when they die
PERCEPTION = NodeSpec("perception", "captain_perception", "perception_node",
                      "captain_perception.nodes.perception_node:PerceptionNode",
                      "captain_perception.nodes.perception_params:SCHEMA", respawn=True)
EPISODE_RUNNER = NodeSpec("episode_runner", "captain_harness", "episode_runner_node",
                          "captain_harness.nodes.episode_runner_node:EpisodeRunnerNode",
                          "captain_harness.nodes.episode_runner_params:SCHEMA", respawn=True)
XR1_TWIN = NodeSpec("xr1_twin", "captain_backends", "xr1_twin",
                    "captain_backends.nodes.xr1_twin:XR1Twin")

#: Which nodes each bringup runs, in start order.
STACKS: dict[str, tuple[NodeSpec, ...]] = {
    "sim": (HARNESS, PERCEPTION, EPISODE_RUNNER),
    "xr1_twin": (XR1_TWIN, HARNESS, PERCEPTION, EPISODE_RUNNER),
    "xr1_real": (HARNESS, PERCEPTION, EPISODE_RUNNER),
}


def stack_nodes(stack: str) -> tuple[NodeSpec, ...]:
    """The nodes of a stack; an unknown name lists the valid ones."""
    if stack not in STACKS:
        raise StackError(f"unknown stack {stack!r}; choose one of: {', '.join(STACKS)}")
    return STACKS[stack]


def process_groups(stack: str) -> dict[str, tuple[NodeSpec, ...]]:
    """The node groups of a stack (one OS process each), in start order, with their nodes.

    Raises:
        StackError: an unknown stack, or a group whose nodes disagree on ``respawn``.
    """
    groups: dict[str, list[NodeSpec]] = {}
    for spec in stack_nodes(stack):
        groups.setdefault(spec.process_group, []).append(spec)
    for name, specs in groups.items():
        if len({(s.respawn, s.respawn_delay_s) for s in specs}) > 1:
            raise StackError(f"node group {name!r} of {stack}: its nodes disagree on respawn")
    return {name: tuple(specs) for name, specs in groups.items()}


def param_files(stack: str, config_dir: Path | None = None) -> list[Path]:
    """The parameter files of a stack, base first, overlay last."""
    stack_nodes(stack)
    config_dir = config_dir or default_config_dir()
    return [config_dir / "captain.yaml", config_dir / f"{stack}.yaml"]


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested YAML groups as dotted ROS parameter names (``{"motion": {"a": 1}}`` ->
    ``{"motion.a": 1}``), as ROS 2 reads a parameter file."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def node_key(key: str) -> str:
    """The node name of a parameter-file key (``harness``, ``/harness``, ``/**/harness``)."""
    return str(key).rsplit("/", 1)[-1]


def load_params(stack: str, config_dir: Path | None = None,
                extra_files: list[Path] | None = None) -> dict[str, dict[str, Any]]:
    """Merged ``ros__parameters`` per node name (dotted names for nested groups), as
    ``ros2 launch`` would apply them; ``extra_files`` are further overlays, last wins."""
    merged: dict[str, dict[str, Any]] = {}
    for path in [*param_files(stack, config_dir), *(extra_files or [])]:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise StackError(f"cannot read parameter file {path}: {exc}") from exc
        for node, body in data.items():
            if not isinstance(body, dict) or "ros__parameters" not in body:
                raise StackError(f"{path}: entry {node!r} must contain 'ros__parameters'")
            merged.setdefault(node_key(node), {}).update(flatten(body["ros__parameters"] or {}))
    known = {n.name for n in stack_nodes(stack)}
    stray = sorted(set(merged) - known - {n.name for s in STACKS.values() for n in s})
    if stray:
        raise StackError(f"parameters for unknown node(s) {', '.join(stray)}; nodes are: {', '.join(sorted(known))}")
    return {name: merged.get(name, {}) for name in known}
