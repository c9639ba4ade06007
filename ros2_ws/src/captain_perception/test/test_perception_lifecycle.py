"""The perception node as a managed node over real rclpy (Fast DDS, isolated domain): a
foreign client reads its lifecycle state through ``lifecycle_msgs``, deactivates it (the
served segmenter and the proxied perception calls then answer ``not_available`` saying the
node is inactive), activates it again (they work), and an ``autostart:=false`` node waits
unconfigured until a client configures and activates it, and cleanup releases the backends
(configure builds them again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from captain_backends.core.driver import HEAD_CAMERA

pytestmark = [pytest.mark.ros, pytest.mark.sim]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_remote_perception import NodeProcess, ServerProcess, _domain, load_frames, record_frames  # noqa: E402


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    return load_frames(record_frames(tmp_path_factory.mktemp("frames") / "tabletop.npz"))


@pytest.fixture(scope="module")
def client():
    with _domain():
        from stack_support import Client

        c = Client()
        try:
            yield c
        finally:
            c.close()


def _state(client, node: str) -> str:
    from lifecycle_msgs.srv import GetState

    return client.call(GetState, f"{node}/get_state", GetState.Request()).current_state.label


def _change(client, node: str, transition_id: int) -> bool:
    """One transition; its request is not resent (a transition runs once)."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    request = ChangeState.Request(transition=Transition(id=transition_id))
    return client.call(ChangeState, f"{node}/change_state", request, resend_s=30.0).success


def _prime(client, node: str, refused: int | None = None) -> None:
    """Make the change_state client's replies reach it before a real transition: send one
    the node refuses (default: configure, refused once configured), resent until answered."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    transition = Transition.TRANSITION_CONFIGURE if refused is None else refused
    request = ChangeState.Request(transition=Transition(id=transition))
    assert not client.call(ChangeState, f"{node}/change_state", request).success


def test_served_segmenter_follows_the_lifecycle(client, frames):
    from lifecycle_msgs.msg import Transition

    from captain_interfaces.srv import PerceiveFrame
    from captain_perception.core.errors import BackendUnavailableError
    from captain_perception.core.pointcloud import FrameCloud
    from captain_perception.core.remote import RemoteSegmenter
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    namespace = "/managed"
    node = f"{namespace}/perception"
    proc = ServerProcess(namespace=namespace)
    transports = [RosPerceptionTransport(namespace, use_action=a, grace_s=1.0) for a in (True, False)]
    try:
        assert _state(client, node) == "active"  # autostarted
        segmenters = [RemoteSegmenter(t, "classical", timeout_s=20.0) for t in transports]
        cloud = FrameCloud(frames[HEAD_CAMERA])
        before = [s.segment(cloud, "red cube") for s in segmenters]
        assert all(segs for segs in before)

        _prime(client, node)
        assert _change(client, node, Transition.TRANSITION_DEACTIVATE)
        assert _state(client, node) == "inactive"
        for segmenter in segmenters:  # the action goal and the service call alike
            with pytest.raises(BackendUnavailableError, match=r"perception node /managed/perception is inactive"):
                segmenter.segment(cloud, "red cube")
        reply = client.call(PerceiveFrame, f"{namespace}/perception/perceive_frame",
                            PerceiveFrame.Request(kind="segment", prompt="red cube"))
        assert reply.status == "not_available" and "inactive" in reply.message and not reply.regions

        assert _change(client, node, Transition.TRANSITION_ACTIVATE)
        assert _state(client, node) == "active"
        after = [s.segment(cloud, "red cube") for s in segmenters]
        for a, b in zip(before, after, strict=True):
            assert [s.mask.sum() for s in a] == [s.mask.sum() for s in b]
    finally:
        for t in transports:
            t.close()
        proc.stop()
    assert proc.proc.returncode == 0, "\n".join(proc.lines[-20:])


def test_proxied_calls_follow_the_lifecycle(client):
    """With a real harness node (mock driver) and the perception node on simulated time: a
    proxied call (the first service the node lists) answers while active, ``not_available``
    with the reason while inactive."""
    from lifecycle_msgs.msg import Transition

    from captain_interfaces.srv import RobotCall

    namespace = "/proxied"
    node = f"{namespace}/perception"
    harness = NodeProcess("captain_harness.nodes.harness_node", "driver:=mock", "camera_rate_hz:=0.0",
                          namespace=namespace, ready_timeout_s=120.0)
    perception = None
    try:
        # use_sim_time while simulated time stands still (nothing steps the mock driver): the
        # node still discovers the harness's calls (its timers run on a steady clock)
        perception = NodeProcess("captain_perception.nodes.perception_node", "serve:=false", "use_sim_time:=true",
                                 namespace=namespace, ready_timeout_s=60.0)
        served = [line for line in perception.lines if "serving" in line and "calls:" in line]
        assert served, "\n".join(perception.lines[-20:])
        service = next(s.strip() for s in served[0].split("calls:")[1].split(",") if s.strip())

        def call() -> dict:
            response = client.call(RobotCall, f"{namespace}/{service}", RobotCall.Request(args_json="{}"))
            return json.loads(response.result.result_json)

        assert _state(client, node) == "active"
        active = call()
        assert active["failure_category"] != "not_available", active  # answered by the harness
        _prime(client, node)
        assert _change(client, node, Transition.TRANSITION_DEACTIVATE)
        refused = call()
        assert refused["success"] is False and refused["failure_category"] == "not_available", refused
        assert "perception node /proxied/perception is inactive" in refused["message"]
        assert _change(client, node, Transition.TRANSITION_ACTIVATE)
        again = call()
        assert (again["success"], again["failure_category"]) == (active["success"], active["failure_category"])
    finally:
        if perception is not None:
            perception.stop()
        harness.stop()


def test_no_autostart_waits_for_a_lifecycle_manager(client, frames):
    """``autostart:=false``: unconfigured until a client configures and activates it; after a
    cleanup (the backends released) a new configure builds them again and they answer."""
    from lifecycle_msgs.msg import Transition

    from captain_perception.core.pointcloud import FrameCloud
    from captain_perception.core.remote import RemoteSegmenter
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    namespace = "/managed_late"
    node = f"{namespace}/perception"
    # not READY until active: started without waiting for its READY line
    proc = subprocess.Popen([sys.executable, "-m", "captain_perception.nodes.perception_node", "--ros-args",
                             "-p", "proxy:=false", "-p", "autostart:=false", "-r", f"__ns:={namespace}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    transport = None
    try:
        assert _state(client, node) == "unconfigured"
        _prime(client, node, refused=Transition.TRANSITION_ACTIVATE)
        assert _change(client, node, Transition.TRANSITION_CONFIGURE)
        assert _state(client, node) == "inactive"
        assert _change(client, node, Transition.TRANSITION_ACTIVATE)
        transport = RosPerceptionTransport(namespace, use_action=False, grace_s=1.0)
        segmenter = RemoteSegmenter(transport, "classical", timeout_s=20.0)
        first = segmenter.segment(FrameCloud(frames[HEAD_CAMERA]), "red cube")
        assert first

        assert _change(client, node, Transition.TRANSITION_DEACTIVATE)
        assert _change(client, node, Transition.TRANSITION_CLEANUP)
        assert _state(client, node) == "unconfigured"
        assert _change(client, node, Transition.TRANSITION_CONFIGURE)
        assert _change(client, node, Transition.TRANSITION_ACTIVATE)
        again = segmenter.segment(FrameCloud(frames[HEAD_CAMERA]), "red cube")
        assert [s.mask.sum() for s in again] == [s.mask.sum() for s in first]
    finally:
        if transport is not None:
            transport.close()
        proc.send_signal(2)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
