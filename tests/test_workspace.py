"""The ROS 2 workspace: five ament packages that colcon finds and builds."""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "ros2_ws" / "src"
PACKAGES = {
    "captain_interfaces": "ament_cmake",
    "captain_harness": "ament_python",
    "captain_perception": "ament_python",
    "captain_backends": "ament_python",
    "captain_bringup": "ament_python",
}


def _colcon_env() -> dict[str, str]:
    env = dict(os.environ)
    venv = ROOT / ".venv"
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    env.setdefault("AMENT_PREFIX_PATH", str(venv))
    return env


def test_colcon_lists_the_five_packages() -> None:
    # src/ only: ros2_ws/vendor holds standard messages built where the ROS 2 wheels lack them
    out = subprocess.run(["colcon", "list", "--base-paths", "src"], cwd=ROOT / "ros2_ws", capture_output=True,
                         text=True, env=_colcon_env(), timeout=120, check=True)
    found = {line.split()[0]: line.split()[-1].strip("()") for line in out.stdout.splitlines() if line.strip()}
    assert found == {name: f"ros.{kind}" for name, kind in PACKAGES.items()}


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_package_manifest_is_format_3_with_real_dependencies(name: str) -> None:
    root = ET.parse(SRC / name / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == name
    assert root.find("export/build_type").text == PACKAGES[name]
    deps = {e.text for e in root if e.tag.endswith("depend")}
    if PACKAGES[name] == "ament_python":
        assert "rclpy" in deps
        assert (SRC / name / "resource" / name).exists()
        assert (SRC / name / name / "core" / "__init__.py").exists(), "every Python package has a ROS-free core"


def test_interfaces_are_built_and_importable() -> None:
    from captain_interfaces.action import Hold, MoveTo, Recover, Release, RunEpisode
    from captain_interfaces.srv import RobotCall

    goal = MoveTo.Goal(position_m=[0.4, 0.0, 0.2], quaternion_wxyz=[0.0, 2**-0.5, 2**-0.5, 0.0], mode="guarded")
    assert list(goal.quaternion_wxyz) == pytest.approx([0.0, 0.7071068, 0.7071068, 0.0])
    for action in (Hold, Recover, Release, RunEpisode):
        assert hasattr(action, "Goal") and hasattr(action, "Result") and hasattr(action, "Feedback")
    assert hasattr(RobotCall.Response(), "result")


@pytest.mark.slow
def test_ament_python_packages_build_with_colcon(tmp_path: Path) -> None:
    """A plain `colcon build` of the Python packages (the path full ROS 2 installs use)."""
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = subprocess.run(
        ["colcon", "--log-base", "log", "build", "--packages-skip", "captain_interfaces",
         "--event-handlers", "console_cohesion-", "status-"],
        cwd=tmp_path, capture_output=True, text=True, env=_colcon_env(), timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for name in ("captain_harness", "captain_perception", "captain_backends", "captain_bringup"):
        assert (tmp_path / "install" / name / "share" / name / "package.xml").exists()
    assert (tmp_path / "install" / "captain_bringup" / "lib" / "captain_bringup" / "captain").exists()
