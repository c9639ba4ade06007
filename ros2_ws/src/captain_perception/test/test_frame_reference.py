"""Perception requests by frame reference: the node answers a request naming ``(camera,
stamp)`` from the frames it received on its camera topics, with the same answers as
in-process and as a request carrying the pixels; a frame the node does not hold is sent
again with its pixels (no failure reaches the caller)."""

from __future__ import annotations

import contextlib
import dataclasses
import time

import numpy as np
import pytest
from test_remote_perception import ServerProcess, _domain, answers, assert_same, load_frames, record_frames

from captain_backends.core.driver import CameraFrame
from captain_perception.core.errors import PerceptionError
from captain_perception.core.frame_refs import FrameRing, PublishedFrames, stamp_key
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.remote import FRAME_NOT_HELD, PerceptionRequest, RemoteSegmenter
from captain_perception.core.segmenters import ClassicalSegmenter
from captain_perception.core.serving import PerceptionServer


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> dict[str, CameraFrame]:
    return load_frames(record_frames(tmp_path_factory.mktemp("frames") / "tabletop.npz"))


class MessageTransport:
    """Sends a request through its ROS messages (fill_request / request_from_msg and back)
    to an in-process server, recording how many pixel bytes each request carried."""

    def __init__(self, server: PerceptionServer, references: PublishedFrames | None = None) -> None:
        self.server = server
        self.references = references
        self.pixel_bytes: list[int] = []

    def __call__(self, request: PerceptionRequest):
        from captain_interfaces.srv import PerceiveFrame
        from captain_perception.nodes.perception_messages import (
            fill_reply,
            fill_request,
            reply_from_msg,
            request_from_msg,
        )

        msg = fill_request(PerceiveFrame.Request(), request)
        self.pixel_bytes.append(len(msg.frame.rgb) + 4 * len(msg.frame.depth_m))
        reply = self.server.handle(request_from_msg(msg))
        return reply_from_msg(fill_reply(PerceiveFrame.Response(), reply))


def _published(frames: dict[str, CameraFrame]) -> PublishedFrames:
    """A registry noting ``frames`` as published (as ``publish_frames`` does)."""
    published = PublishedFrames()
    for f in frames.values():
        published.note(f)
    return published


def _ring_of(frames: dict[str, CameraFrame]) -> FrameRing:
    ring = FrameRing(4)
    for f in frames.values():  # as the node stores what it decodes from the topics: copies
        ring.put(f.name, stamp_key(f.time_s), rgb=f.rgb.copy(), depth_m=f.depth_m.astype(np.float32).copy())
    return ring


def test_by_reference_equals_pixels_and_in_process(frames):
    local = answers(ClassicalSegmenter(), frames)
    assert any(isinstance(a, list) and a for a in local), "the recorded frames ground no prompt"
    server = PerceptionServer(ClassicalSegmenter(), None, frames=_ring_of(frames).get)
    try:
        by_pixels = MessageTransport(server)
        assert_same(local, answers(RemoteSegmenter(by_pixels, "classical"), frames))
        assert min(by_pixels.pixel_bytes) > 512 * 512 * 3

        by_ref = MessageTransport(server, _published(frames))
        remote = RemoteSegmenter(by_ref, "classical")
        assert_same(local, answers(remote, frames))
        assert by_ref.pixel_bytes == [0] * len(local)  # no pixels travelled
        assert remote.reference_counts == {"sent": len(local), "not_held": 0}
        assert server.counts["by_reference"] == len(local)
    finally:
        server.close()


def test_reference_uses_the_nodes_frame_and_the_requests_calibration(frames):
    """The node's frame is what gets segmented (a different frame under the same stamp gives
    another answer); K and T_base_camera come from the request."""
    f = next(iter(frames.values()))
    ring = FrameRing(2)
    ring.put(f.name, stamp_key(f.time_s), rgb=np.zeros_like(f.rgb), depth_m=np.ones_like(f.depth_m))
    held = PerceptionServer(ClassicalSegmenter(), None, frames=ring.get)._frame(
        PerceptionRequest(kind="segment", text="x", frame=f, frame_ref=(f.name, f.time_s)))
    assert held is not None and not held.rgb.any() and held.rgb is not f.rgb
    assert np.array_equal(held.K, f.K) and np.array_equal(held.T_base_camera, f.T_base_camera)


def test_frame_not_held_is_sent_again_with_pixels(frames):
    local = answers(ClassicalSegmenter(), frames)
    server = PerceptionServer(ClassicalSegmenter(), None, frames=FrameRing(2).get)  # holds nothing
    try:
        transport = MessageTransport(server, _published(frames))
        remote = RemoteSegmenter(transport, "classical")
        assert_same(local, answers(remote, frames))
        assert remote.reference_counts == {"sent": len(local), "not_held": len(local)}
        assert transport.pixel_bytes[0::2] == [0] * len(local) and min(transport.pixel_bytes[1::2]) > 0
        f = next(iter(frames.values()))
        reply = server.handle(PerceptionRequest(kind="segment", text="cube", frame_ref=(f.name, f.time_s + 1.0)))
        assert reply.status == FRAME_NOT_HELD and "send the frame's pixels" in reply.message
    finally:
        server.close()


def test_client_references_only_the_published_arrays(frames):
    f = next(iter(frames.values()))
    published = PublishedFrames()
    assert published.reference(f) is None
    published.note(f)
    assert published.reference(f) == (f.name, f.time_s)
    assert published.reference_rgb(f.rgb) == (f.name, pytest.approx(f.time_s))
    copy = dataclasses.replace(f, rgb=f.rgb.copy())
    assert published.reference(copy) is None  # same stamp, not the published arrays
    # the segmenter leaves pixels out of the cloud (robot self-filter): pixels must travel
    server = PerceptionServer(ClassicalSegmenter(), None)
    transport = MessageTransport(server, published)
    exclude = np.zeros(f.depth_m.shape, bool)
    exclude[:10] = True
    with contextlib.suppress(PerceptionError):  # found or not: it must not go by reference
        RemoteSegmenter(transport, "classical").segment(FrameCloud(f, exclude), "nothing like this", 1)
    assert transport.pixel_bytes and transport.pixel_bytes[0] > 0
    # another content under the same stamp: never by reference again
    published.note(copy)
    assert published.reference(f) is None and published.reference(copy) is None
    server.close()


def test_ring_keeps_the_latest_complete_frames():
    ring = FrameRing(2)
    rgb, depth = np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), np.float32)
    ring.put("cam", stamp_key(1.0), rgb=rgb)
    assert ring.get("cam", 1.0) is None  # depth not come yet
    ring.put("cam", stamp_key(1.0), depth_m=depth)
    assert ring.get("cam", 1.0000004) is not None and ring.get("cam", 1.000002) is None
    ring.put("cam", stamp_key(2.0), rgb=rgb, depth_m=depth)
    ring.put("cam", stamp_key(3.0), rgb=rgb, depth_m=depth)
    assert ring.get("cam", 1.0) is None and ring.stamps("cam") == [2_000_000, 3_000_000]
    assert ring.get("other", 3.0) is None


# ------------------------------------------------------------------ over ROS
@pytest.mark.ros
@pytest.mark.sim
def test_over_ros_by_reference_and_fallback(frames):
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    local = answers(ClassicalSegmenter(), frames)
    cameras = ",".join(sorted(frames))
    with _domain():
        keeping = ServerProcess(f"frame_cameras:={cameras}", "request_timeout_s:=20.0", namespace="/refs")
        plain = ServerProcess("request_timeout_s:=20.0", namespace="/plain")
        try:
            for namespace, node, held in (("/refs", keeping, True), ("/plain", plain, False)):
                for use_action in (True, False):
                    transport = RosPerceptionTransport(namespace, use_action=use_action)
                    try:
                        transport.publish_frames(frames)
                        deadline = time.monotonic() + 15.0
                        while held:  # wait until the node has every frame (delivery is asynchronous)
                            statuses = [transport(PerceptionRequest(kind="segment", text="red cube", frame=f,
                                                                    frame_ref=(f.name, f.time_s), timeout_s=20.0),
                                                  use_action=False).status for f in frames.values()]
                            if FRAME_NOT_HELD not in statuses:
                                break
                            assert time.monotonic() < deadline, "the node never received the published frames"
                            transport.publish_frames(frames)
                            time.sleep(0.2)
                        remote = RemoteSegmenter(transport, "classical", timeout_s=20.0)
                        assert_same(local, answers(remote, frames))
                        assert remote.reference_counts["sent"] == len(local)
                        assert remote.reference_counts["not_held"] == (0 if held else len(local)), node.lines[-5:]
                        described = transport.describe()
                        assert (described["by_reference"] > 0) == held
                    finally:
                        transport.close()
        finally:
            keeping.stop()
            plain.stop()
