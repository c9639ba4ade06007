"""Configuration of the XR1 driver: one schema (type, default, unit, valid range, meaning).

The configuration is a YAML file (``config/xr1.yaml`` in this package is the default)
read into frozen dataclasses. Every field is declared once below with its unit, range
and description; ``load_config`` checks types, ranges and cross-field consistency and
names the offending key (``arm.upper_rad[3]``) and the valid choices when a value is
wrong. Unknown keys are errors that list the known ones, so a typo never passes
silently.

Topic names are relative (no leading ``/``): the driver's node lives in
``namespace``, so one robot's stack can be namespaced as a whole.

Frames: joint values in rad (prismatic gripper joints in m), Cartesian offsets in the
robot base frame or in the named parent frame of the description model, metres; camera
poses are those of the OpenCV optical frame (x right, y down, z forward).
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from captain_backends.core.xr1.errors import XR1ConfigError

#: The two ways position commands reach ros2_control.
COMMAND_INTERFACES = ("forward_position", "joint_trajectory")
#: The model formats a vendor description may have.
MODEL_FORMATS = ("auto", "urdf", "mjcf")


def _meta(*, unit: str = "", low: float | None = None, high: float | None = None,
          choices: tuple[str, ...] = (), doc: str = "") -> dict[str, Any]:
    """Field metadata: unit, inclusive range, choices and description."""
    return {"unit": unit, "low": low, "high": high, "choices": choices, "doc": doc}


def _spec(default: Any = MISSING, *, unit: str = "", low: float | None = None, high: float | None = None,
          choices: tuple[str, ...] = (), doc: str = "") -> Any:
    """A dataclass field carrying its unit, inclusive range, choices and description."""
    meta = _meta(unit=unit, low=low, high=high, choices=choices, doc=doc)
    if default is MISSING:
        return field(metadata=meta)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ArmConfig:
    """The commanded arm joints (command order) and their limits."""

    joint_names: tuple[str, ...] = _spec(doc="arm joint names as in joint_states and the model, command order")
    lower_rad: tuple[float, ...] = _spec(unit="rad", low=-2 * math.pi, high=2 * math.pi,
                                         doc="lower position limits, one per joint")
    upper_rad: tuple[float, ...] = _spec(unit="rad", low=-2 * math.pi, high=2 * math.pi,
                                         doc="upper position limits, one per joint")
    velocity_limit_rad_s: tuple[float, ...] = _spec(unit="rad/s", low=0.01, high=10.0,
                                                    doc="joint velocity limits, one per joint")
    home_rad: tuple[float, ...] = _spec(unit="rad", low=-2 * math.pi, high=2 * math.pi,
                                        doc="a safe, collision-free configuration inside the limits")
    max_step_rad: float = _spec(0.02, unit="rad", low=1e-4, high=0.5,
                                doc="largest change of any joint command from one control period to the next")
    velocity_scale: float = _spec(1.0, low=0.01, high=1.0,
                                  doc="fraction of the velocity limits a command may use per period")


@dataclass(frozen=True)
class CommandConfig:
    """Where position commands go (ros2_control's standard topic interfaces)."""

    interface: str = _spec("forward_position", choices=COMMAND_INTERFACES,
                           doc="forward_position: std_msgs/Float64MultiArray to a forward position "
                               "controller; joint_trajectory: one-point trajectory_msgs/JointTrajectory")
    forward_position_topic: str = _spec("forward_position_controller/commands",
                                        doc="Float64MultiArray command topic (arm joints in command order)")
    joint_trajectory_topic: str = _spec("joint_trajectory_controller/joint_trajectory",
                                        doc="JointTrajectory command topic")
    trajectory_time_from_start_s: float = _spec(0.0, unit="s", low=0.0, high=1.0,
                                                doc="time_from_start of the trajectory point (0: one control "
                                                    "period)")


@dataclass(frozen=True)
class GripperConfig:
    """A position-controlled gripper: joints in joint_states, commands through a forward
    position controller. Opening fraction = mean over joints of
    ``(q - closed) / (open - closed)``."""

    joint_names: tuple[str, ...] = _spec(doc="gripper joint names as in joint_states")
    closed_positions: tuple[float, ...] = _spec(unit="rad or m", low=-10.0, high=10.0,
                                                doc="joint positions with the jaw closed")
    open_positions: tuple[float, ...] = _spec(unit="rad or m", low=-10.0, high=10.0,
                                              doc="joint positions with the jaw fully open")
    max_opening_m: float = _spec(unit="m", low=0.001, high=0.5,
                                 doc="distance between the fingertips when fully open")
    command_topic: str = _spec("gripper_controller/commands",
                               doc="Float64MultiArray command topic (gripper joints in the order above)")


@dataclass(frozen=True)
class WrenchConfig:
    """The wrist force/torque sensor (force_torque_sensor_broadcaster's topic)."""

    topic: str = _spec("force_torque_sensor_broadcaster/wrench",
                       doc="geometry_msgs/WrenchStamped topic; empty: the robot has no F/T sensor")
    frame: str = _spec("", doc="model frame the wrench is expressed in; empty: already in the base frame")


@dataclass(frozen=True)
class SafetyConfig:
    """Conditions under which the driver stops commanding and reports a fault."""

    stale_state_timeout_s: float = _spec(0.1, unit="s", low=0.005, high=2.0,
                                         doc="fault when an arm joint's state is older than this")
    stale_wrench_timeout_s: float = _spec(0.5, unit="s", low=0.005, high=10.0,
                                          doc="fault when the F/T reading is older than this (when configured)")
    emergency_force_n: float = _spec(120.0, unit="N", low=1.0, high=2000.0,
                                     doc="fault when the measured force norm exceeds this")
    emergency_torque_nm: float = _spec(30.0, unit="N·m", low=0.1, high=500.0,
                                       doc="fault when the measured torque norm exceeds this")
    first_state_timeout_s: float = _spec(5.0, unit="s", low=0.1, high=120.0,
                                         doc="configure() waits this long for the first joint state")
    controller_timeout_s: float = _spec(2.0, unit="s", low=0.05, high=120.0,
                                        doc="activate() waits this long for a subscriber on the command topic")
    camera_timeout_s: float = _spec(2.0, unit="s", low=0.05, high=60.0,
                                    doc="capture() waits this long for a fresh frame")
    camera_max_age_s: float = _spec(1.0, unit="s", low=0.01, high=60.0,
                                    doc="a frame older than this is not fresh")


@dataclass(frozen=True)
class CameraConfig:
    """One RGB-D camera: image, depth (registered to the colour image: same size and
    intrinsics; 16UC1 in mm or 32FC1 in m) and camera_info topics, and the static pose
    of its optical frame in ``parent_frame`` (tf2 is not used)."""

    name: str = _spec(doc="camera name of the policy API (agentview, robot0_eye_in_hand)")
    image_topic: str = _spec(doc="sensor_msgs/Image colour topic (rgb8, bgr8, rgba8, bgra8 or mono8)")
    depth_topic: str = _spec(doc="sensor_msgs/Image depth topic (16UC1 mm or 32FC1 m)")
    camera_info_topic: str = _spec(doc="sensor_msgs/CameraInfo of the colour image")
    xyz_m: tuple[float, float, float] = _spec(unit="m", low=-10.0, high=10.0,
                                              doc="optical frame origin in the parent frame")
    rpy_rad: tuple[float, float, float] = _spec(unit="rad", low=-2 * math.pi, high=2 * math.pi,
                                                doc="optical frame orientation in the parent frame "
                                                    "(URDF roll-pitch-yaw: R = Rz(y) Ry(p) Rx(r))")
    parent_frame: str = _spec("", doc="model frame the camera is mounted on; empty: the base frame")


@dataclass(frozen=True)
class DescriptionConfig:
    """The kinematic model. ``model_path`` is the one place a vendor URDF/MJCF goes;
    left empty, the documented stand-in arm (robosuite's Panda) is used."""

    name: str = _spec("xr1_standin_panda", doc="robot model name reported by description()")
    model_path: str | None = _spec(None, doc="vendor URDF or MJCF (relative to this YAML file); null: stand-in")
    model_format: str = _spec("auto", choices=MODEL_FORMATS, doc="auto: from the file suffix")
    srdf_path: str | None = _spec(None, doc="SRDF with disabled self-collision pairs (relative to this YAML)")
    base_frame: str | None = _spec(None, doc="base link of the model (required with model_path)")
    flange_frame: str | None = _spec(None, doc="link the tool centre point is attached to (required with "
                                               "model_path)")
    tcp_xyz_m: tuple[float, float, float] | None = _spec(None, unit="m", low=-1.0, high=1.0,
                                                         doc="tool centre point in the flange frame")
    tcp_rpy_rad: tuple[float, float, float] | None = _spec(None, unit="rad", low=-2 * math.pi,
                                                           high=2 * math.pi,
                                                           doc="tool frame orientation in the flange frame")


@dataclass(frozen=True)
class XR1Config:
    """The whole XR1 driver configuration (see the module docstring)."""

    arm: ArmConfig = field(metadata=_meta(doc="the commanded arm joints and their limits"))
    control_rate_hz: float = _spec(100.0, unit="Hz", low=1.0, high=1000.0,
                                   doc="rate of advance(): one command per period")
    namespace: str = _spec("", doc="ROS namespace of the driver's node (all topics are relative)")
    node_name: str = _spec("xr1_driver", doc="name of the driver's ROS node")
    joint_states_topic: str = _spec("joint_states", doc="sensor_msgs/JointState topic (joint_state_broadcaster)")
    command: CommandConfig = field(default_factory=CommandConfig, metadata=_meta(doc="where position commands go"))
    gripper: GripperConfig | None = field(default=None, metadata=_meta(doc="the gripper; null: no gripper"))
    wrench: WrenchConfig = field(default_factory=WrenchConfig, metadata=_meta(doc="the F/T sensor"))
    safety: SafetyConfig = field(default_factory=SafetyConfig, metadata=_meta(doc="fault conditions"))
    cameras: tuple[CameraConfig, ...] = _spec((), doc="RGB-D cameras by name")
    description: DescriptionConfig = field(default_factory=DescriptionConfig,
                                           metadata=_meta(doc="the kinematic model"))
    source_dir: str = _spec("", doc="folder relative model paths are resolved against (the YAML's folder)")

    @property
    def control_period_s(self) -> float:
        """One control period, seconds."""
        return 1.0 / self.control_rate_hz

    def camera(self, name: str) -> CameraConfig:
        """The camera called ``name``.

        Raises:
            XR1ConfigError: listing the configured cameras.
        """
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise XR1ConfigError(f"no camera {name!r} configured; cameras: {', '.join(self.camera_names) or 'none'}")

    @property
    def camera_names(self) -> tuple[str, ...]:
        """Names of the configured cameras."""
        return tuple(c.name for c in self.cameras)

    def resolve_path(self, path: str) -> Path:
        """``path`` made absolute against the folder of the YAML file it came from."""
        p = Path(path).expanduser()
        return p if p.is_absolute() or not self.source_dir else Path(self.source_dir) / p


# ------------------------------------------------------------------------------ loading
def default_config_path() -> Path:
    """The packaged ``config/xr1.yaml``: the source tree's copy, else the installed share."""
    source = Path(__file__).resolve().parents[3] / "config" / "xr1.yaml"
    if source.is_file():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory

        installed = Path(get_package_share_directory("captain_backends")) / "config" / "xr1.yaml"
        if installed.is_file():
            return installed
    except Exception:  # the ament index is absent or the package is not installed
        pass
    raise XR1ConfigError(f"the default XR1 configuration is missing (looked for {source} and the "
                         "captain_backends share folder); pass config='path/to/xr1.yaml'")


def load_config(config: XR1Config | Mapping[str, Any] | str | Path | None = None,
                **overrides: Any) -> XR1Config:
    """Read and validate an XR1 configuration.

    Args:
        config: a YAML path, a mapping with the YAML's structure, an ``XR1Config``, or
            None for the packaged default.
        overrides: top-level keys replacing (for mappings: merged into) the loaded
            values, e.g. ``namespace="xr1"`` or ``safety={"emergency_force_n": 60.0}``.

    Raises:
        XR1ConfigError: naming the key, its unit and valid range or choices.
    """
    source_dir = ""
    if isinstance(config, XR1Config):
        if not overrides:
            return config
        data = to_dict(config)
    elif config is None or isinstance(config, (str, Path)):
        path = Path(config) if config is not None else default_config_path()
        data = _read_yaml(path)
        source_dir = str(path.resolve().parent)
    elif isinstance(config, Mapping):
        data = copy.deepcopy(dict(config))
    else:
        raise XR1ConfigError(f"config must be a YAML path, a mapping or an XR1Config; got {type(config).__name__}")
    data = _merge(data, overrides)
    if source_dir and not data.get("source_dir"):
        data["source_dir"] = source_dir
    cfg = _build(XR1Config, data, "")
    _check_consistency(cfg)
    return cfg


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise XR1ConfigError(f"XR1 configuration file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise XR1ConfigError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise XR1ConfigError(f"{path} must hold a mapping of configuration keys at the top level")
    return data


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def to_dict(config: Any) -> Any:
    """A configuration (or part of one) as plain YAML-able values."""
    if is_dataclass(config):
        if isinstance(config, XR1Config):
            out = {f.name: to_dict(getattr(config, f.name)) for f in fields(config) if f.name != "cameras"}
            out["cameras"] = {c.name: {k: v for k, v in to_dict(c).items() if k != "name"} for c in config.cameras}
            return out
        return {f.name: to_dict(getattr(config, f.name)) for f in fields(config)}
    if isinstance(config, tuple):
        return [to_dict(v) for v in config]
    return config


def _where(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _describe_range(meta: Mapping[str, Any]) -> str:
    unit = f" {meta['unit']}" if meta.get("unit") else ""
    return f"{meta['low']}..{meta['high']}{unit}"


def _check_number(value: Any, kind: type, key: str, meta: Mapping[str, Any]) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and isinstance(value, float)):
        unit = f" in {meta['unit']}" if meta.get("unit") else ""
        raise XR1ConfigError(f"{key} must be a {kind.__name__}{unit}; got {value!r}")
    value = kind(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise XR1ConfigError(f"{key} must be finite; got {value!r}")
    low, high = meta.get("low"), meta.get("high")
    if (low is not None and value < low) or (high is not None and value > high):
        raise XR1ConfigError(f"{key} = {value!r} is outside its valid range {_describe_range(meta)}")
    return value


def _convert(hint: Any, value: Any, key: str, meta: Mapping[str, Any]) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if value is None and type(None) in args:
            return None
        return _convert(inner[0], value, key, meta)
    if is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise XR1ConfigError(f"{key} must be a mapping with keys {', '.join(f.name for f in fields(hint))}; "
                                 f"got {value!r}")
        return _build(hint, value, key)
    if origin is tuple:
        if is_dataclass(args[0]):  # a mapping name -> fields
            if not isinstance(value, Mapping):
                raise XR1ConfigError(f"{key} must be a mapping from names to {args[0].__name__} fields")
            return tuple(_build(args[0], {"name": n, **(v or {})}, _where(key, n)) for n, v in value.items())
        if not isinstance(value, (list, tuple)):
            raise XR1ConfigError(f"{key} must be a list; got {value!r}")
        if len(args) != 2 or args[1] is not Ellipsis:
            if len(value) != len(args):
                raise XR1ConfigError(f"{key} must have exactly {len(args)} values; got {len(value)}")
            kinds = args
        else:
            kinds = (args[0],) * len(value)
        return tuple(_convert(k, v, f"{key}[{i}]", meta) for i, (k, v) in enumerate(zip(kinds, value, strict=True)))
    if hint in (int, float):
        return _check_number(value, hint, key, meta)
    if hint is bool:
        if not isinstance(value, bool):
            raise XR1ConfigError(f"{key} must be true or false; got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise XR1ConfigError(f"{key} must be a string; got {value!r}")
        if meta.get("choices") and value not in meta["choices"]:
            raise XR1ConfigError(f"{key} = {value!r} is not one of: {', '.join(meta['choices'])}")
        return value
    raise XR1ConfigError(f"{key}: unsupported schema type {hint!r}")  # pragma: no cover - schema bug


def _build(cls: type, data: Mapping[str, Any], path: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise XR1ConfigError(f"unknown key(s) {', '.join(_where(path, u) for u in unknown)}; "
                             f"known keys{' of ' + path if path else ''}: {', '.join(known)}")
    values = {}
    for name, f in known.items():
        key = _where(path, name)
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise XR1ConfigError(f"{key} is required ({f.metadata.get('doc', '')})")
            continue
        values[name] = _convert(hints[name], data[name], key, f.metadata)
    return cls(**values)


def _check_topic(name: str, key: str, *, allow_empty: bool = False) -> None:
    if not name:
        if allow_empty:
            return
        raise XR1ConfigError(f"{key} must name a topic")
    if name.startswith("/"):
        raise XR1ConfigError(f"{key} = {name!r} is absolute; use a relative name (without the leading '/') "
                             "and set 'namespace' so the robot's stack can be namespaced")
    if any(c.isspace() for c in name):
        raise XR1ConfigError(f"{key} = {name!r} contains whitespace")


def _check_consistency(cfg: XR1Config) -> None:
    arm = cfg.arm
    n = len(arm.joint_names)
    if n == 0:
        raise XR1ConfigError("arm.joint_names must list at least one joint")
    if len(set(arm.joint_names)) != n:
        raise XR1ConfigError(f"arm.joint_names has duplicates: {list(arm.joint_names)}")
    for name in ("lower_rad", "upper_rad", "velocity_limit_rad_s", "home_rad"):
        if len(getattr(arm, name)) != n:
            raise XR1ConfigError(f"arm.{name} has {len(getattr(arm, name))} values but arm.joint_names has {n}")
    for i, (lo, hi, home) in enumerate(zip(arm.lower_rad, arm.upper_rad, arm.home_rad, strict=True)):
        if not lo < hi:
            raise XR1ConfigError(f"arm.lower_rad[{i}] = {lo} must be below arm.upper_rad[{i}] = {hi} "
                                 f"(joint {arm.joint_names[i]})")
        if not lo <= home <= hi:
            raise XR1ConfigError(f"arm.home_rad[{i}] = {home} is outside [{lo}, {hi}] rad "
                                 f"(joint {arm.joint_names[i]})")
    if cfg.namespace and (cfg.namespace.strip("/") != cfg.namespace.lstrip("/") or " " in cfg.namespace):
        raise XR1ConfigError(f"namespace = {cfg.namespace!r} must be a ROS namespace like 'xr1' or '/robots/xr1'")
    _check_topic(cfg.joint_states_topic, "joint_states_topic")
    _check_topic(cfg.command.forward_position_topic, "command.forward_position_topic")
    _check_topic(cfg.command.joint_trajectory_topic, "command.joint_trajectory_topic")
    _check_topic(cfg.wrench.topic, "wrench.topic", allow_empty=True)
    g = cfg.gripper
    if g is not None:
        m = len(g.joint_names)
        if m == 0:
            raise XR1ConfigError("gripper.joint_names must list at least one joint (or set gripper: null)")
        if set(g.joint_names) & set(arm.joint_names):
            raise XR1ConfigError("gripper.joint_names and arm.joint_names must not share joints")
        for name in ("closed_positions", "open_positions"):
            if len(getattr(g, name)) != m:
                raise XR1ConfigError(f"gripper.{name} has {len(getattr(g, name))} values but gripper.joint_names "
                                     f"has {m}")
        for i, (c, o) in enumerate(zip(g.closed_positions, g.open_positions, strict=True)):
            if c == o:
                raise XR1ConfigError(f"gripper.closed_positions[{i}] equals gripper.open_positions[{i}] ({c})")
        _check_topic(g.command_topic, "gripper.command_topic")
    names = [c.name for c in cfg.cameras]
    if len(set(names)) != len(names):
        raise XR1ConfigError(f"camera names must be unique: {names}")
    for cam in cfg.cameras:
        for topic in ("image_topic", "depth_topic", "camera_info_topic"):
            _check_topic(getattr(cam, topic), f"cameras.{cam.name}.{topic}")
    d = cfg.description
    if d.model_path:
        missing = [k for k in ("base_frame", "flange_frame", "tcp_xyz_m", "tcp_rpy_rad") if getattr(d, k) is None]
        if missing:
            raise XR1ConfigError(f"description.{', description.'.join(missing)} required when "
                                 "description.model_path names a vendor model")
        path = cfg.resolve_path(d.model_path)
        if not path.is_file():
            raise XR1ConfigError(f"description.model_path {path} does not exist")
        if d.model_format == "auto" and path.suffix.lower() not in (".urdf", ".xml", ".mjcf"):
            raise XR1ConfigError(f"cannot tell the format of {path.name} from its suffix; set "
                                 f"description.model_format to one of: {', '.join(MODEL_FORMATS[1:])}")
        if d.srdf_path and not cfg.resolve_path(d.srdf_path).is_file():
            raise XR1ConfigError(f"description.srdf_path {cfg.resolve_path(d.srdf_path)} does not exist")


def describe_schema(cls: type = XR1Config, path: str = "") -> str:
    """A Markdown table of every key: type, default, unit, range or choices, meaning."""
    rows = [] if path else ["| key | type | default | unit | range | description |", "|---|---|---|---|---|---|"]
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        key = _where(path, f.name)
        hint = hints[f.name]
        nested = [a for a in (hint, *typing.get_args(hint)) if is_dataclass(a)]
        if nested and f.name != "source_dir":
            rows.append(f"| `{key}` | mapping | | | | {f.metadata.get('doc', '')} |")
            sub = f"{key}.<name>" if typing.get_origin(hint) is tuple else key
            rows.append(describe_schema(nested[0], sub))
            continue
        meta = f.metadata
        default = "required" if f.default is MISSING and f.default_factory is MISSING else repr(f.default)
        rng = ", ".join(meta["choices"]) if meta.get("choices") else (
            f"{meta['low']}..{meta['high']}" if meta.get("low") is not None else "")
        type_name = getattr(hint, "__name__", str(hint).replace("typing.", ""))
        rows.append(f"| `{key}` | {type_name} | {default} | {meta.get('unit', '')} | {rng} | {meta.get('doc', '')} |")
    return "\n".join(rows)
