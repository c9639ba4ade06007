"""Conversions between the perception requests and replies (``core.remote``) and their
ROS messages (captain_interfaces ``Perceive`` action, ``PerceiveFrame`` service,
``PerceptionFrame``, ``PerceptionRegion``).

Large arrays travel as ``array.array`` (the generated message setters copy those as one
buffer; a ``bytes`` or list value would be checked element by element). Masks are
``numpy.packbits``; depth is float32 metres, as ``CameraFrame`` holds it.
"""

from __future__ import annotations

import array
import json
import math
from typing import Any

import numpy as np

from captain_backends.core.driver import CameraFrame
from captain_interfaces.msg import PerceptionFrame, PerceptionRegion
from captain_perception.core.remote import (
    PerceptionReply,
    PerceptionRequest,
    RegionAnswer,
    evidence_json,
    pack_mask,
    unpack_mask,
)

#: fields shared by the action goal and the service request
_REQUEST_FIELDS = ("kind", "backend", "client_id", "text", "max_results", "timeout_s")


def frame_to_msg(frame: CameraFrame | None, ref: tuple[str, float] | None = None, depth: bool = True) -> Any:
    """A ``PerceptionFrame`` carrying ``frame``'s pixels; or, with ``ref`` ``(camera, stamp_s)``,
    only the reference and ``frame``'s calibration (``k``, ``t_base_camera``; zeros without a frame)."""
    msg = PerceptionFrame()
    if ref is not None:
        msg.camera, msg.stamp_s = str(ref[0]), float(ref[1])
        if frame is not None and frame.rgb.size and frame.rgb.ndim == 3:
            msg.k = np.asarray(frame.K, dtype=np.float64).ravel()
            msg.t_base_camera = np.asarray(frame.T_base_camera, dtype=np.float64).ravel()
        return msg
    if frame is None:
        return msg
    rgb = np.ascontiguousarray(frame.rgb[..., :3], dtype=np.uint8)
    h, w = rgb.shape[:2]
    msg.camera, msg.stamp_s, msg.width, msg.height = str(frame.name), float(frame.time_s), int(w), int(h)
    msg.rgb = array.array("B", rgb.tobytes())
    if depth:
        msg.depth_m = array.array("f", np.ascontiguousarray(frame.depth_m, dtype=np.float32).tobytes())
    msg.k = np.asarray(frame.K, dtype=np.float64).ravel()
    msg.t_base_camera = np.asarray(frame.T_base_camera, dtype=np.float64).ravel()
    return msg


def frame_from_msg(msg: Any) -> tuple[CameraFrame | None, tuple[str, float] | None]:
    """``(frame, None)`` when the message carries pixels, else ``(calibration, (camera, stamp_s))``
    where ``calibration`` is a frame without pixels holding the message's ``K`` and
    ``T_base_camera`` (None when they are zeros: the node's own are used).

    Raises:
        ValueError: the arrays' lengths do not match the size.
    """
    if len(msg.rgb) == 0 and len(msg.depth_m) == 0:
        K = np.array(msg.k, dtype=np.float64).reshape(3, 3)
        T = np.array(msg.t_base_camera, dtype=np.float64).reshape(4, 4)
        calibration = None
        if K.any() and T.any():
            calibration = CameraFrame(name=msg.camera, rgb=np.zeros((0, 0, 3), np.uint8),
                                      depth_m=np.zeros((0, 0), np.float32), K=K, T_base_camera=T,
                                      time_s=float(msg.stamp_s))
        return calibration, (msg.camera, float(msg.stamp_s))
    w, h = int(msg.width), int(msg.height)
    if len(msg.rgb) != w * h * 3:
        raise ValueError(f"a {w}x{h} frame needs {w * h * 3} rgb bytes, got {len(msg.rgb)}")
    rgb = np.frombuffer(msg.rgb, dtype=np.uint8).reshape(h, w, 3)
    if len(msg.depth_m) == 0:
        depth = np.zeros((0, 0), np.float32)
    elif len(msg.depth_m) != w * h:
        raise ValueError(f"a {w}x{h} frame needs {w * h} depth values, got {len(msg.depth_m)}")
    else:
        depth = np.frombuffer(msg.depth_m, dtype=np.float32).reshape(h, w)
    K = np.array(msg.k, dtype=np.float64).reshape(3, 3)
    T = np.array(msg.t_base_camera, dtype=np.float64).reshape(4, 4)
    return CameraFrame(name=msg.camera, rgb=rgb, depth_m=depth, K=K, T_base_camera=T,
                       time_s=float(msg.stamp_s)), None


def fill_request(target: Any, request: PerceptionRequest) -> Any:
    """Fill a ``Perceive.Goal`` or ``PerceiveFrame.Request`` from ``request``."""
    target.kind, target.backend, target.client_id, target.text = (request.kind, request.backend,
                                                                  request.client_id, request.text)
    target.max_results, target.timeout_s = int(request.max_results), float(request.timeout_s)
    target.pixel_uv = [float(x) for x in request.pixel_uv] if request.pixel_uv else []
    target.box_uv = [float(x) for x in request.box_uv] if request.box_uv else []
    target.frame = frame_to_msg(request.frame, request.frame_ref, request.depth)
    return target


def request_from_msg(msg: Any) -> PerceptionRequest:
    """The ``PerceptionRequest`` of a ``Perceive.Goal`` or ``PerceiveFrame.Request``.

    Raises:
        ValueError: a malformed frame or query.
    """
    frame, ref = frame_from_msg(msg.frame)
    pixel = tuple(float(x) for x in msg.pixel_uv)
    box = tuple(float(x) for x in msg.box_uv)
    if (pixel and len(pixel) != 2) or (box and len(box) != 4):
        raise ValueError("pixel_uv needs 2 values and box_uv 4 (or none)")
    if not all(math.isfinite(x) for x in (*pixel, *box)):
        raise ValueError("pixel_uv and box_uv must be finite")
    return PerceptionRequest(kind=msg.kind, text=msg.text, frame=frame, frame_ref=ref, backend=msg.backend,
                             max_results=int(msg.max_results), pixel_uv=pixel or None,  # type: ignore[arg-type]
                             box_uv=box or None, timeout_s=float(msg.timeout_s),  # type: ignore[arg-type]
                             client_id=msg.client_id, depth=ref is not None or frame.depth_m.size > 0)


def region_to_msg(region: RegionAnswer) -> Any:
    """A ``PerceptionRegion`` of one answer."""
    msg = PerceptionRegion()
    msg.label, msg.score = region.label, float(region.score)
    msg.evidence_json = evidence_json(region.evidence)
    if region.mask is not None:
        msg.height, msg.width = (int(n) for n in region.mask.shape[:2])
        msg.mask_packed = array.array("B", pack_mask(region.mask))
        msg.point_uv = [math.nan, math.nan]
    else:
        msg.point_uv = [float(x) for x in (region.point_uv or (math.nan, math.nan))]
    return msg


def region_from_msg(msg: Any) -> RegionAnswer:
    """The answer of a ``PerceptionRegion``."""
    mask = unpack_mask(msg.mask_packed, int(msg.width), int(msg.height)) if len(msg.mask_packed) else None
    point = tuple(float(x) for x in msg.point_uv)
    evidence = json.loads(msg.evidence_json) if msg.evidence_json else {}
    return RegionAnswer(label=msg.label, score=float(msg.score), mask=mask,
                        point_uv=point if mask is None and all(math.isfinite(x) for x in point) else None,
                        evidence=evidence)


def fill_reply(target: Any, reply: PerceptionReply) -> Any:
    """Fill a ``Perceive.Result`` or ``PerceiveFrame.Response`` from ``reply``."""
    target.status, target.message, target.backend, target.raw_text = (str(reply.status), reply.message,
                                                                      reply.backend, reply.raw_text)
    target.regions = [region_to_msg(r) for r in reply.regions]
    target.model_time_s, target.queue_time_s, target.server_time_s = (float(reply.model_time_s),
                                                                      float(reply.queue_time_s),
                                                                      float(reply.server_time_s))
    return target


def reply_from_msg(msg: Any) -> PerceptionReply:
    """The ``PerceptionReply`` of a ``Perceive.Result`` or ``PerceiveFrame.Response``."""
    return PerceptionReply(status=msg.status, message=msg.message, backend=msg.backend,
                           regions=tuple(region_from_msg(r) for r in msg.regions), raw_text=msg.raw_text,
                           model_time_s=msg.model_time_s, queue_time_s=msg.queue_time_s,
                           server_time_s=msg.server_time_s)
