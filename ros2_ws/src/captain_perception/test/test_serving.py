"""The perception node's queue (core.serving), ROS-free: a bounded queue that refuses
overload, per-request timeouts, cancel, arrival order; and the remote backends' mapping of
replies and transport failures onto the perception errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from captain_backends.core.driver import CameraFrame
from captain_perception.core.backend_choice import choose_backends, process_namespace, resolve_mode
from captain_perception.core.errors import BackendUnavailableError, InvalidPerceptionArgument, NothingFoundError
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.remote import (
    PerceptionRequest,
    PerceptionTimeoutError,
    RemoteSegmenter,
    TransportError,
    pack_mask,
    unpack_mask,
)
from captain_perception.core.segmenters import ClassicalSegmenter
from captain_perception.core.segmenters.base import Segment, Segmenter
from captain_perception.core.serving import PerceptionServer, ServingConfig


class SlowSegmenter(Segmenter):
    """A backend that takes ``delay_s`` and answers one mask (the queue's subject here)."""

    name = "slow"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.started: list[str] = []

    def segment(self, cloud: FrameCloud, text: str, max_results: int = 5) -> list[Segment]:
        self.started.append(text)
        time.sleep(self.delay_s)
        return [Segment(mask=np.ones(cloud.depth_m.shape, bool), score=0.5, label=text)]


def _frame() -> CameraFrame:
    return CameraFrame(name="agentview", rgb=np.zeros((8, 8, 3), np.uint8), depth_m=np.ones((8, 8), np.float32),
                       K=np.eye(3), T_base_camera=np.eye(4), time_s=0.0)


def _request(text: str = "cube", timeout_s: float = 5.0) -> PerceptionRequest:
    return PerceptionRequest(kind="segment", text=text, frame=_frame(), backend="slow", timeout_s=timeout_s)


def _in_threads(server: PerceptionServer, requests: list[PerceptionRequest]) -> list:
    replies: list = [None] * len(requests)

    def ask(k: int) -> None:
        replies[k] = server.handle(requests[k])

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(len(requests))]
    for t in threads:
        t.start()
        time.sleep(0.02)  # arrival order
    for t in threads:
        t.join(10)
    return replies


def test_queue_refuses_overload_and_serves_in_arrival_order():
    backend = SlowSegmenter(0.2)
    server = PerceptionServer(backend, None, ServingConfig(queue_size=2, workers=1))
    replies = _in_threads(server, [_request("a"), _request("b"), _request("c")])
    statuses = [r.status for r in replies]
    assert statuses == ["ok", "ok", "not_available"], statuses
    assert "overloaded" in replies[2].message
    assert backend.started == ["a", "b"]
    assert replies[1].queue_time_s > 0.1  # b waited for a
    assert server.counts["refused_overloaded"] == 1 and server.held == 0
    server.close()


def test_timeouts_while_waiting_and_while_running():
    server = PerceptionServer(SlowSegmenter(0.6), None, ServingConfig(queue_size=4, workers=1))
    replies = _in_threads(server, [_request("a", timeout_s=0.3), _request("b", timeout_s=0.2)])
    assert [r.status for r in replies] == ["timeout", "timeout"]
    assert "did not finish" in replies[0].message and "without starting" in replies[1].message
    # the running backend keeps its worker until it ends; then the next request runs
    time.sleep(0.5)
    assert server.handle(_request("c")).status == "ok"
    server.close()


def test_cancel_leaves_the_queue():
    server = PerceptionServer(SlowSegmenter(0.3), None, ServingConfig(queue_size=4, workers=1))
    cancel = threading.Event()
    first = threading.Thread(target=server.handle, args=(_request("a"),))
    first.start()
    time.sleep(0.05)
    threading.Timer(0.05, cancel.set).start()
    started = time.monotonic()
    reply = server.handle(_request("b"), cancelled=cancel.is_set)
    assert reply.status == "cancelled" and time.monotonic() - started < 0.25
    first.join(5)
    server.close()


def test_requests_checked_before_queueing():
    server = PerceptionServer(SlowSegmenter(0.0), None)
    assert server.handle(PerceptionRequest(kind="track", text="a", frame=_frame())).status == "invalid_argument"
    assert server.handle(PerceptionRequest(kind="segment", text=" ", frame=_frame())).status == "invalid_argument"
    other = server.handle(PerceptionRequest(kind="segment", text="a", frame=_frame(), backend="sam3"))
    assert other.status == "not_available" and "'slow'" in other.message
    assert server.handle(PerceptionRequest(kind="point", text="a", frame=_frame())).status == "not_available"
    by_ref = server.handle(PerceptionRequest(kind="segment", text="a", frame_ref=("agentview", 1.0)))
    assert by_ref.status == "frame_not_held" and "send the frame's pixels" in by_ref.message
    server.close()


def test_remote_segmenter_maps_replies_and_transport_failures():
    cloud = FrameCloud(_frame())
    server = PerceptionServer(ClassicalSegmenter(), None)
    remote = RemoteSegmenter(server.handle, "classical", timeout_s=5.0)
    with pytest.raises(NothingFoundError):  # a flat empty frame: nothing to ground
        remote.segment(cloud, "red cube")
    with pytest.raises(BackendUnavailableError, match="'classical', not 'sam3'"):
        RemoteSegmenter(server.handle, "sam3").segment(cloud, "red cube")

    def down(_request):
        raise TransportError("no perception node answers")

    with pytest.raises(BackendUnavailableError, match=r"not available \(no perception node answers"):
        RemoteSegmenter(down).segment(cloud, "red cube")
    slow = PerceptionServer(SlowSegmenter(0.5), None)
    with pytest.raises(PerceptionTimeoutError):
        RemoteSegmenter(slow.handle, "slow", timeout_s=0.1).segment(cloud, "cube")
    server.close()
    slow.close()


def test_masks_pack_exactly():
    rng = np.random.default_rng(0)
    mask = rng.random((37, 53)) > 0.5
    assert np.array_equal(unpack_mask(pack_mask(mask), 53, 37), mask)
    with pytest.raises(ValueError, match="packed bytes"):
        unpack_mask(pack_mask(mask), 54, 37)


class _Driver:
    def __init__(self, simulated: bool) -> None:
        self.simulated = simulated


def test_backend_choice():
    assert resolve_mode(_Driver(True), {}) == "in_process"
    assert resolve_mode(_Driver(False), {}) == "remote"
    assert resolve_mode(_Driver(True), {"CAPTAIN_SEGMENTER": "sam3"}) == "remote"
    assert resolve_mode(_Driver(False), {"CAPTAIN_PERCEPTION": "in_process"}) == "in_process"
    with pytest.raises(InvalidPerceptionArgument, match="auto, in_process, remote"):
        resolve_mode(_Driver(True), {"CAPTAIN_PERCEPTION": "cloud"})
    with pytest.raises(InvalidPerceptionArgument, match="must be a number of seconds"):
        choose_backends(_Driver(True), {"CAPTAIN_PERCEPTION": "remote", "CAPTAIN_PERCEPTION_TIMEOUT_S": "-1"})
    segmenter, pointer = choose_backends(_Driver(True), {"CAPTAIN_PERCEPTION": "remote"}, transport=lambda r: r)
    assert isinstance(segmenter, RemoteSegmenter) and segmenter.name == "classical" and pointer is not None
    assert process_namespace(["x", "--ros-args", "--params-file", "p.yaml", "-r", "__ns:=/robot1"]) == "/robot1"
    assert process_namespace(["x", "-r", "__ns:=/robot1"]) == ""
