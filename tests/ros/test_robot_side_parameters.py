"""The XR1 fake hardware's and twin's parameters mean what they say, over the standard
parameter services of real rclpy nodes (a foreign client node, Fast DDS): parameters
read once at start refuse a change with the reason; dynamic ones take effect; a value a
node cannot apply is refused with the reason instead of being accepted and ignored."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.ros


class Nodes:
    """A robot-side node and a client node spun by one executor in a thread."""

    def __init__(self, make: Any) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = make(self.context)
        self.client = rclpy.create_node("parameter_client", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.client)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def set(self, **values: Any) -> list[Any]:
        """``SetParameters`` results through the node's parameter service."""
        from rclpy.parameter import Parameter
        from rclpy.parameter_client import AsyncParameterClient

        client = AsyncParameterClient(self.client, self.node.get_name())
        assert client.wait_for_services(timeout_sec=10.0), "parameter services not found"
        future = client.set_parameters([Parameter(k, value=v) for k, v in values.items()])
        deadline = time.monotonic() + 10.0
        while not future.done():
            assert time.monotonic() < deadline, "set_parameters timed out"
            time.sleep(0.005)
        return list(future.result().results)

    def close(self) -> None:
        close = getattr(self.node, "close", None)
        if close is not None:
            close()
        self.executor.shutdown(timeout_sec=2.0)
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        self.client.destroy_node()
        self.context.try_shutdown()


def _fake(context: Any) -> Any:
    from captain_backends.nodes.xr1_fake_hardware import XR1FakeHardware

    return XR1FakeHardware(context=context)


@pytest.fixture
def fake(ros_domain: int) -> Iterator[Nodes]:
    nodes = Nodes(_fake)
    yield nodes
    nodes.close()


def test_read_only_parameters_refuse_a_change_with_the_reason(fake: Nodes) -> None:
    for name, value in (("config_path", "/tmp/other.yaml"), ("image_width_px", 64), ("depth_encoding", "32FC1")):
        (result,) = fake.set(**{name: value})
        assert not result.successful and "read-only" in result.reason and name in result.reason, result.reason
    assert fake.node.get_parameter("image_width_px").value == 320


def test_dynamic_parameters_take_effect(fake: Nodes) -> None:
    (result,) = fake.set(time_constant_s=0.5)
    assert result.successful, result.reason
    assert fake.node.arm.time_constant_s == 0.5
    (result,) = fake.set(camera_rate_hz=0.0)
    assert result.successful, result.reason
    assert not fake.node._cameras_on and fake.node._camera_period_s == np.inf
    (result,) = fake.set(camera_rate_hz=4.0)
    assert result.successful and fake.node._cameras_on and fake.node._camera_period_s == pytest.approx(0.25)
    # out of range: refused with the range, the old value kept
    (result,) = fake.set(time_constant_s=-1.0)
    assert not result.successful and "range" in result.reason, result.reason
    assert fake.node.arm.time_constant_s == 0.5
    (result,) = fake.set(camera_rate_hz=500.0)
    assert not result.successful and fake.node._camera_period_s == pytest.approx(0.25)


def test_injected_force_must_be_three_finite_values(fake: Nodes) -> None:
    (result,) = fake.set(injected_force_n=[0.0, 5.0])
    assert not result.successful and "three finite values" in result.reason, result.reason
    (result,) = fake.set(injected_force_n=[0.0, float("nan"), 1.0])
    assert not result.successful and "three finite values" in result.reason, result.reason
    (result,) = fake.set(injected_force_n=[0.0, 0.0, -30.0])
    assert result.successful, result.reason
    assert list(fake.node.get_parameter("injected_force_n").value) == [0.0, 0.0, -30.0]


def test_twin_refuses_scene_changes_and_starting_cameras_it_has_not(ros_domain: int) -> None:
    from rclpy.parameter import Parameter

    from captain_backends.nodes.xr1_twin import XR1Twin

    def make(context: Any) -> Any:
        # no cameras: the twin builds no renderer and refuses to start one later
        return XR1Twin(context=context, parameter_overrides=[Parameter("camera_rate_hz", value=0.0)])

    twin = Nodes(make)
    try:
        for name, value in (("task", "stack_cubes"), ("seed", 3), ("image_size_px", 128)):
            (result,) = twin.set(**{name: value})
            assert not result.successful and "read-only" in result.reason, result.reason
        (result,) = twin.set(camera_rate_hz=2.0)
        assert not result.successful and "without cameras" in result.reason, result.reason
        assert twin.node._camera_period_s == np.inf
        (result,) = twin.set(camera_rate_hz=0.0)
        assert result.successful, result.reason
    finally:
        twin.close()
