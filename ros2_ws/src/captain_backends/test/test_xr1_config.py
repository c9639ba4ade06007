"""XR1 configuration: the packaged YAML loads, every wrong value is refused with a message
that names the key and what is valid, and the description is built from the real model
files (the stand-in Panda MJCF, or a vendor URDF) with Pinocchio."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from captain_backends.core.xr1.config import (
    XR1Config,
    default_config_path,
    describe_schema,
    load_config,
    to_dict,
)
from captain_backends.core.xr1.description import build_model
from captain_backends.core.xr1.errors import XR1ConfigError
from captain_backends.core.xr1.kinematics import transform_from_xyz_rpy


def _default() -> dict:
    return yaml.safe_load(default_config_path().read_text())


def test_packaged_config_loads_and_round_trips() -> None:
    cfg = load_config()
    assert cfg.control_period_s == pytest.approx(0.01)
    assert len(cfg.arm.joint_names) == 7 and cfg.gripper is not None
    assert cfg.camera_names == ("agentview", "robot0_eye_in_hand")
    assert cfg.description.model_path is None  # the stand-in arm
    assert Path(cfg.source_dir) == default_config_path().parent
    again = load_config(to_dict(cfg))
    assert again == cfg
    # overrides merge into nested sections without dropping their other keys
    tuned = load_config(None, namespace="xr1", safety={"emergency_force_n": 60.0})
    assert tuned.namespace == "xr1" and tuned.safety.emergency_force_n == 60.0
    assert tuned.safety.stale_state_timeout_s == cfg.safety.stale_state_timeout_s


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(control_rate_hz=5000.0), r"control_rate_hz = 5000.0 is outside its valid range 1.0..1000.0 Hz"),
    (lambda d: d.update(control_rate_hz="fast"), r"control_rate_hz must be a float in Hz"),
    (lambda d: d["arm"].update(velocity_limit_rad_s=[2.0] * 6), r"arm.velocity_limit_rad_s has 6 values but arm"),
    (lambda d: d["arm"]["upper_rad"].__setitem__(3, -3.5),
     r"arm.lower_rad\[3\] = -3.0718 must be below arm.upper_rad\[3\]"),
    (lambda d: d["arm"]["home_rad"].__setitem__(0, 3.0), r"arm.home_rad\[0\] = 3.0 is outside"),
    (lambda d: d["arm"].pop("joint_names"), r"arm.joint_names is required"),
    (lambda d: d["arm"].update(max_stepp_rad=0.1),
     r"unknown key\(s\) arm.max_stepp_rad; known keys of arm: joint_names"),
    (lambda d: d["command"].update(interface="velocity"),
     r"command.interface = 'velocity' is not one of: forward_position, joint_trajectory"),
    (lambda d: d.update(joint_states_topic="/joint_states"), r"is absolute; use a relative name"),
    (lambda d: d["safety"].update(stale_state_timeout_s=0.0), r"safety.stale_state_timeout_s = 0.0 is outside"),
    (lambda d: d["gripper"].update(open_positions=[0.0, 0.0]), r"gripper.closed_positions\[0\] equals"),
    (lambda d: d["cameras"]["agentview"].update(xyz_m=[1.0, 2.0]), r"cameras.agentview.xyz_m must have exactly 3"),
    (lambda d: d["safety"].update(emergency_force_n=True), r"safety.emergency_force_n must be a float in N"),
    (lambda d: d["description"].update(model_path="missing_vendor.urdf", base_frame="b", flange_frame="f",
                                       tcp_xyz_m=[0, 0, 0], tcp_rpy_rad=[0, 0, 0]),
     r"description.model_path .*missing_vendor.urdf does not exist"),
    (lambda d: d["description"].update(model_path="xr1.yaml"), r"description.base_frame, description.flange_frame"),
])
def test_invalid_values_are_refused_with_a_teaching_message(change, message) -> None:
    data = _default()
    change(data)
    with pytest.raises(XR1ConfigError, match=message):
        load_config(data | {"source_dir": str(default_config_path().parent)})


def test_schema_documents_every_key_with_unit_and_range() -> None:
    table = describe_schema()
    for key in ("control_rate_hz", "arm.max_step_rad", "safety.stale_state_timeout_s",
                "cameras.<name>.rpy_rad", "description.model_path", "command.interface"):
        assert f"`{key}`" in table
    assert "| `safety.emergency_force_n` | float | 120.0 | N | 1.0..2000.0 |" in table


def test_stand_in_description_matches_the_tabletop_panda() -> None:
    from captain_backends.core.tabletop.panda_model import ARM_JOINT_NAMES, BASE_BODY, FLANGE_BODY

    model = build_model(load_config())
    d = model.description
    assert model.is_stand_in and d.model_format == "mjcf" and d.model_path.is_file() and d.srdf_path.is_file()
    assert d.arm_joint_names == ARM_JOINT_NAMES and (d.base_frame, d.flange_frame) == (BASE_BODY, FLANGE_BODY)
    # The grip site is 9.7 cm along the flange z axis, rotated -90 deg about z (robosuite's gripper mount).
    assert d.T_flange_tcp[:3, 3] == pytest.approx([0.0, 0.0, 0.097], abs=1e-9)
    assert d.T_flange_tcp[:3, :3] == pytest.approx(np.array([[0, 1, 0], [-1, 0, 0], [0, 0, 1]]), abs=1e-9)
    # Forward kinematics at home: the flange points down, in front of the base.
    T = model.kinematics.T_base_frame(d.home_joint_positions_rad, d.flange_frame)
    assert T[2, 2] < -0.95 and 0.3 < T[0, 3] < 0.6


def test_limits_beyond_the_model_and_unknown_joints_are_refused() -> None:
    data = _default()
    data["arm"]["upper_rad"][0] = 3.2  # the Panda's joint 1 stops at 2.8973 rad
    with pytest.raises(XR1ConfigError, match=r"arm limits of robot0_joint1 .* exceed the model's"):
        build_model(load_config(data))
    data = _default()
    data["arm"]["joint_names"][6] = "robot0_joint8"
    with pytest.raises(XR1ConfigError, match=r"not in the model .*its joints: robot0_joint1"):
        build_model(load_config(data))
    data = _default()
    data["cameras"]["robot0_eye_in_hand"]["parent_frame"] = "robot0_wrist"
    with pytest.raises(XR1ConfigError, match=r"frame 'robot0_wrist' is not in the description model; frames:"):
        build_model(load_config(data))


def _vendor_urdf() -> Path:
    import cmeel

    path = (Path(cmeel.__file__).resolve().parents[1] / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
            / "panda_description" / "urdf" / "panda.urdf")
    if not path.is_file():
        pytest.skip("example-robot-data's panda URDF is not installed")
    return path


def test_a_vendor_urdf_goes_in_description_model_path(tmp_path: Path) -> None:
    """A vendor model in the one place it goes: example-robot-data's Panda URDF stands in
    for the vendor's file, with the vendor's own joint and link names."""
    data = _default()
    urdf = _vendor_urdf()
    names = [f"panda_joint{i}" for i in range(1, 8)]
    data["arm"]["joint_names"] = names
    data["gripper"] = None
    data["cameras"]["robot0_eye_in_hand"]["parent_frame"] = "panda_hand"
    data["description"] = {"name": "vendor_arm", "model_path": str(urdf), "base_frame": "panda_link0",
                           "flange_frame": "panda_link8", "tcp_xyz_m": [0.0, 0.0, 0.1034],
                           "tcp_rpy_rad": [0.0, 0.0, -math.pi / 4]}
    path = tmp_path / "vendor.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = load_config(path)
    model = build_model(cfg)
    d = model.description
    assert not model.is_stand_in and d.model_format == "urdf" and d.arm_joint_names == tuple(names)
    assert d.T_flange_tcp == pytest.approx(transform_from_xyz_rpy([0, 0, 0.1034], [0, 0, -math.pi / 4]))
    # Panda at zero: flange (link8) at x = 0.088, z = 0.333 + 0.316 + 0.384 - 0.107 = 0.926 m.
    T = model.kinematics.T_base_frame(np.zeros(7), "panda_link8")
    assert T[:3, 3] == pytest.approx([0.088, 0.0, 0.926], abs=1e-6)
    assert isinstance(cfg, XR1Config) and cfg.gripper is None
