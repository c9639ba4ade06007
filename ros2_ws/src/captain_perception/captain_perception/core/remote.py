"""Segmentation and pointing answered by the perception node: the harness-side backends.

``RemoteSegmenter`` and ``RemotePointer`` implement the interfaces the perception calls
already use (``Segmenter.segment``, ``PointingClient.point``) by sending the frame and
the query to the perception node (``captain_perception.nodes.perception_server``) through
a *transport*: a callable ``PerceptionRequest -> PerceptionReply``. The ROS transport is
``captain_perception.nodes.perception_client.RosPerceptionTransport``; this module stays
ROS-free.

Failures map onto the same exceptions as an in-process backend, so the calls report them
the same way and the episode goes on:

* the node is down, not reachable, refuses the backend or is overloaded:
  ``BackendUnavailableError`` (``not_available``) with the reason;
* the request ran past its timeout: ``PerceptionTimeoutError`` (``timeout``);
* nothing matched: ``NothingFoundError`` (``not_found``) with the backend's own message.

Frames by reference (``captain_perception.core.frame_refs``): given ``references`` (the
frames this process published on the node's camera topics), a request about such a frame
names it by ``(camera, stamp_s)`` and carries only its ``K`` and ``T_base_camera``; when
the node answers ``frame_not_held`` (it did not receive that frame, or no longer holds
it) the request is sent once more with the pixels, so the caller sees no difference.
A segment request goes by reference only when nothing is left out of the cloud (no
``exclude`` pixels): the node's cloud of the referenced frame is then the same.

Units: pixel coordinates normalised ``(u, v)`` in [0, 1], u from the left, v from the top;
times in seconds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from captain_backends.core.driver import CameraFrame
from captain_harness.core.results import FailureCategory
from captain_perception.core.errors import (
    BackendUnavailableError,
    InvalidPerceptionArgument,
    NothingFoundError,
    PerceptionError,
)
from captain_perception.core.frame_refs import FrameRef, PublishedFrames
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.pointer import PointAnswer, PointingClient
from captain_perception.core.segmenters.base import Segment, Segmenter

#: Kinds of request the perception node answers.
KINDS = ("segment", "point")
#: The reply status of a request by reference whose frame the node does not hold (the
#: client sends the pixels instead).
FRAME_NOT_HELD = "frame_not_held"


class PerceptionTimeoutError(PerceptionError):
    """A request to the perception node did not complete within its timeout."""

    category = FailureCategory.TIMEOUT


class TransportError(Exception):
    """The perception node could not be asked or did not answer (down, not discovered, gone)."""


@dataclass(frozen=True)
class PerceptionRequest:
    """One question to the perception node.

    Attributes:
        kind: ``"segment"`` (text -> masks) or ``"point"`` (text -> points).
        text: the prompt.
        frame: the camera frame (pixels travel with the request); with ``frame_ref`` only its
            ``K`` and ``T_base_camera`` travel (or it is None).
        frame_ref: ``(camera, stamp_s)`` of a frame the node received on its camera topics.
        backend: the backend the client expects ("" = whatever the node serves).
        max_results: at most this many answers.
        pixel_uv: optional query pixel, normalised.
        box_uv: optional query box ``(u0, v0, u1, v1)``, normalised.
        timeout_s: longest wait plus run time, s (0: the node's default).
        client_id: who asks (logs, diagnostics).
        depth: send the depth image (a pointing model needs only the colour image).
    """

    kind: str
    text: str
    frame: CameraFrame | None = None
    frame_ref: FrameRef | None = None
    backend: str = ""
    max_results: int = 5
    pixel_uv: tuple[float, float] | None = None
    box_uv: tuple[float, float, float, float] | None = None
    timeout_s: float = 0.0
    client_id: str = ""
    depth: bool = True


@dataclass(frozen=True)
class RegionAnswer:
    """One answer: a mask (segmenters) or a point (pointers), with its score and label."""

    label: str
    score: float
    mask: np.ndarray | None = None
    point_uv: tuple[float, float] | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PerceptionReply:
    """The node's answer.

    Attributes:
        status: ``"ok"`` or a failure category (``not_found``, ``not_available``,
            ``timeout``, ``invalid_argument``, ``cancelled``, ``internal_error``), or
            ``frame_not_held`` (a request by reference: send the pixels).
        message: why it failed ("" on success).
        backend: the backend that answered.
        regions: answers, best first.
        raw_text: the pointing model's text.
        model_time_s: time in the backend itself, s.
        queue_time_s: time waiting in the node's queue, s.
        server_time_s: time in the node from receipt to answer, s.
    """

    status: str
    message: str = ""
    backend: str = ""
    regions: tuple[RegionAnswer, ...] = ()
    raw_text: str = ""
    model_time_s: float = 0.0
    queue_time_s: float = 0.0
    server_time_s: float = 0.0


Transport = Callable[[PerceptionRequest], PerceptionReply]


# ------------------------------------------------------------------ encodings (ROS-free)
def pack_mask(mask: np.ndarray) -> bytes:
    """A (H, W) bool mask as ``numpy.packbits`` bytes, row-major."""
    return np.packbits(np.ascontiguousarray(mask, dtype=bool).ravel()).tobytes()


def unpack_mask(data: Any, width: int, height: int) -> np.ndarray:
    """The (height, width) bool mask of ``pack_mask`` bytes (or any buffer of them).

    Raises:
        ValueError: the buffer has the wrong length for the size.
    """
    packed = np.frombuffer(data, dtype=np.uint8)
    if packed.size != (width * height + 7) // 8:
        raise ValueError(f"a {width}x{height} mask needs {(width * height + 7) // 8} packed bytes, "
                         f"got {packed.size}")
    return np.unpackbits(packed, count=width * height).astype(bool).reshape(height, width)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def evidence_json(evidence: dict[str, Any]) -> str:
    """A backend's evidence as JSON (numpy values as plain numbers; tuples as lists)."""
    return json.dumps(evidence or {}, default=_plain)


def failure(status: str, message: str, backend: str = "") -> PerceptionReply:
    """A failed reply."""
    return PerceptionReply(status=status, message=message, backend=backend)


# ------------------------------------------------------------------ client backends
def _raise_for(reply: PerceptionReply, what: str) -> None:
    if reply.status == "ok":
        return
    message = reply.message or f"the perception node answered {reply.status}"
    if reply.status == FailureCategory.NOT_FOUND:
        raise NothingFoundError(message)
    if reply.status == FailureCategory.TIMEOUT:
        raise PerceptionTimeoutError(f"{what}: {message}")
    if reply.status == FailureCategory.INVALID_ARGUMENT:
        raise InvalidPerceptionArgument(message)
    if reply.status in (FailureCategory.NOT_AVAILABLE, FailureCategory.CANCELLED):
        raise BackendUnavailableError(f"{what}: {message}")
    raise PerceptionError(f"{what}: the perception node failed ({reply.status}): {message}")


class _RemoteBase:
    def __init__(self, transport: Transport, *, timeout_s: float = 30.0, client_id: str = "",
                 references: PublishedFrames | None = None) -> None:
        if not timeout_s > 0 or not math.isfinite(timeout_s):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        self.transport = transport
        self.timeout_s = float(timeout_s)
        self.client_id = client_id
        self.references = references if references is not None else getattr(transport, "references", None)
        #: the last reply's timings (s): model, queue, server and the whole round trip
        self.last_timing: dict[str, float] = {}
        #: requests sent by reference, and of those answered ``frame_not_held`` (sent again with pixels)
        self.reference_counts = {"sent": 0, "not_held": 0}

    def _send(self, request: PerceptionRequest, what: str) -> PerceptionReply:
        try:
            return self.transport(request)
        except TransportError as exc:
            raise BackendUnavailableError(
                f"{what}: the perception node is not available ({exc}); the call can be tried again "
                "later, or use mark_point() on a pixel you chose") from exc

    def _ask(self, make: Callable[[FrameRef | None], PerceptionRequest], what: str,
             ref: FrameRef | None = None) -> PerceptionReply:
        """Send ``make(ref)`` (the request by reference); when there is no ``ref`` or the node
        answers ``frame_not_held``, ``make(None)`` (the request with its pixels)."""
        started = time.perf_counter()
        by_reference = ref is not None
        if ref is not None:
            self.reference_counts["sent"] += 1
            reply = self._send(make(ref), what)
            if reply.status == FRAME_NOT_HELD:
                self.reference_counts["not_held"] += 1
                by_reference = False
                reply = self._send(make(None), what)
        else:
            reply = self._send(make(None), what)
        self.last_timing = {"model_s": reply.model_time_s, "queue_s": reply.queue_time_s,
                            "server_s": reply.server_time_s, "round_trip_s": time.perf_counter() - started,
                            "by_reference": float(by_reference)}
        _raise_for(reply, what)
        return reply

    def _reference(self, frame: CameraFrame) -> FrameRef | None:
        return self.references.reference(frame) if self.references is not None else None


class RemoteSegmenter(_RemoteBase, Segmenter):
    """A ``Segmenter`` whose masks come from the perception node.

    Args:
        transport: sends a request and returns the node's reply (raises ``TransportError``).
        backend: the node's segmenter this client expects (reported as ``name``, as the
            in-process backend reports its own); the node refuses a request for another.
        timeout_s: per-request timeout, s (queue wait plus run time).
        client_id: who asks (logs, diagnostics).
    """

    def __init__(self, transport: Transport, backend: str = "classical", *, timeout_s: float = 30.0,
                 client_id: str = "", references: PublishedFrames | None = None) -> None:
        super().__init__(transport, timeout_s=timeout_s, client_id=client_id, references=references)
        self.name = backend

    def segment(self, cloud: FrameCloud, text: str, max_results: int = 5) -> list[Segment]:
        """Instances matching ``text`` in the frame, best first, as the node's backend found them."""
        # the cloud's depth (NaN where invalid or excluded, e.g. the robot's own pixels) is
        # what the segmenter reads: sent as the frame's depth, the node's cloud is the same
        # by reference only when the node's cloud of the published frame is this one
        excluded = cloud.exclude is not None and bool(np.any(cloud.exclude))
        ref = None if excluded else self._reference(cloud.frame)

        def make(by: FrameRef | None) -> PerceptionRequest:
            frame = cloud.frame if by is not None else dataclasses.replace(cloud.frame, depth_m=cloud.depth_m)
            return PerceptionRequest(kind="segment", text=text, frame=frame, frame_ref=by, backend=self.name,
                                     max_results=int(max_results), timeout_s=self.timeout_s, client_id=self.client_id)

        reply = self._ask(make, f"segment({text!r})", ref)
        out = []
        for region in reply.regions:
            if region.mask is None:
                raise PerceptionError(f"the perception node's {reply.backend} answer for {text!r} has no mask")
            out.append(Segment(mask=region.mask, score=region.score, label=region.label, evidence=region.evidence))
        if not out:
            raise NothingFoundError(f"the perception node's {reply.backend} found nothing for {text!r}")
        return out

    def describe(self) -> dict[str, Any]:
        """The backend's name and where it runs."""
        return {"backend": self.name, "remote": True}


class RemotePointer(_RemoteBase, PointingClient):
    """A ``PointingClient`` whose points come from the perception node's pointing model.

    Args: see ``RemoteSegmenter`` (``backend`` is the pointing model's name, "" = any).
    """

    def __init__(self, transport: Transport, backend: str = "", *, timeout_s: float = 30.0,
                 client_id: str = "", references: PublishedFrames | None = None) -> None:
        _RemoteBase.__init__(self, transport, timeout_s=timeout_s, client_id=client_id, references=references)
        PointingClient.__init__(self)
        self.backend = backend

    def point(self, rgb: np.ndarray, text: str) -> PointAnswer:
        """Normalised points for ``text`` in an HxWx3 uint8 image, from the node's pointing model
        (by reference when ``rgb`` is the colour image of a frame published on its camera topics)."""
        ref = self.references.reference_rgb(rgb) if self.references is not None else None
        frame = CameraFrame(name="", rgb=np.asarray(rgb), depth_m=np.zeros((0, 0), np.float32), K=np.eye(3),
                            T_base_camera=np.eye(4), time_s=0.0)
        request = PerceptionRequest(kind="point", text=text, frame=frame, backend=self.backend,
                                    timeout_s=self.timeout_s, client_id=self.client_id, depth=False, max_results=20)
        reply = self._ask(lambda by: dataclasses.replace(request, frame_ref=by), f"point({text!r})", ref)
        points = [r.point_uv for r in reply.regions if r.point_uv is not None]
        if not points:
            raise NothingFoundError(f"the pointing model gave no point for {text!r}; it said: {reply.raw_text[:160]!r}")
        return PointAnswer(points_uv=points, raw_text=reply.raw_text, latency_s=reply.model_time_s)
