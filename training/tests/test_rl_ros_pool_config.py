"""`rollout.pool: ros` settings: the namespaces are required with it and refused without it,
wide-layout starts (which a stack cannot reset to) are refused, and a bad namespace fails
when the pool is built. The pool itself runs against a stack in tests/ros/test_rl_ros_pool_e2e.py."""

from __future__ import annotations

import pytest

from captain_training.rl.config import RolloutConfig
from captain_training.rl.errors import ConfigError
from captain_training.rl.workers import make_pool


def test_ros_pool_settings_are_checked() -> None:
    config = RolloutConfig(pool="ros", namespaces=("/robot1", "/robot2"), wide_layout_fraction=0.0,
                           mode="streaming")
    assert config.namespaces == ("/robot1", "/robot2")
    with pytest.raises(ConfigError, match=r"needs rollout\.namespaces"):
        RolloutConfig(pool="ros", wide_layout_fraction=0.0)
    with pytest.raises(ConfigError, match=r"read only with rollout\.pool ros"):
        RolloutConfig(pool="process", namespaces=("/robot1",))
    with pytest.raises(ConfigError, match="wide_layout_fraction: 0"):
        RolloutConfig(pool="ros", namespaces=("/robot1",), wide_layout_fraction=0.5)


def test_make_pool_refuses_bad_namespaces() -> None:
    with pytest.raises(ConfigError, match="not a ROS namespace"):
        make_pool("ros", namespaces=["/robot-1"])
    with pytest.raises(ConfigError, match=r"needs rollout\.namespaces"):
        make_pool("ros")
    with pytest.raises(ConfigError, match="only by the ros pool"):
        make_pool("inline", namespaces=["/robot1"])
