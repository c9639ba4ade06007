"""sensor_msgs/Image payloads <-> numpy arrays, without ROS.

Colour: ``rgb8``, ``bgr8``, ``rgba8``, ``bgra8``, ``mono8`` decode to HxWx3 uint8 RGB.
Depth (REP 118): ``16UC1`` in millimetres (0 = invalid) or ``32FC1`` in metres
(0 or NaN = invalid) decode to HxW float32 metres with 0 where invalid. Rows may be
padded (``step`` > width x pixel size) and data big-endian (``is_bigendian``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from captain_backends.core.xr1.errors import CameraUnavailableError

_COLOUR_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}
_DEPTH_DTYPES = {"16UC1": np.dtype("<u2"), "mono16": np.dtype("<u2"), "32FC1": np.dtype("<f4")}
COLOUR_ENCODINGS = tuple(_COLOUR_CHANNELS)
DEPTH_ENCODINGS = ("16UC1", "32FC1")


@dataclass(frozen=True)
class RawImage:
    """The fields of a sensor_msgs/Image that carry pixels."""

    encoding: str
    height: int
    width: int
    step: int
    is_bigendian: bool
    data: bytes | memoryview


def _rows(raw: RawImage, dtype: np.dtype, channels: int) -> np.ndarray:
    row_bytes = raw.width * channels * dtype.itemsize
    if raw.step < row_bytes or len(raw.data) < raw.step * raw.height:
        raise CameraUnavailableError(
            f"malformed {raw.encoding} image: {raw.width}x{raw.height}, step {raw.step}, {len(raw.data)} bytes")
    buf = np.frombuffer(raw.data, dtype=np.uint8, count=raw.step * raw.height).reshape(raw.height, raw.step)
    pixels = buf[:, :row_bytes]
    order = dtype.newbyteorder(">" if raw.is_bigendian else "<") if dtype.itemsize > 1 else dtype
    return np.ascontiguousarray(pixels).view(order).reshape(raw.height, raw.width, channels)


def decode_rgb(raw: RawImage) -> np.ndarray:
    """HxWx3 uint8 RGB (row 0 at the top).

    Raises:
        CameraUnavailableError: for an unsupported encoding (listing the supported ones).
    """
    channels = _COLOUR_CHANNELS.get(raw.encoding)
    if channels is None:
        raise CameraUnavailableError(f"colour encoding {raw.encoding!r} is not supported; "
                                     f"supported: {', '.join(COLOUR_ENCODINGS)}")
    px = _rows(raw, np.dtype(np.uint8), channels)
    if raw.encoding == "mono8":
        return np.repeat(px, 3, axis=2)
    if raw.encoding.startswith("bgr"):
        px = px[:, :, 2::-1]
    return np.ascontiguousarray(px[:, :, :3])


def decode_depth_m(raw: RawImage) -> np.ndarray:
    """HxW float32 depth along the optical axis in metres, 0 where invalid.

    Raises:
        CameraUnavailableError: for an unsupported encoding (listing the supported ones).
    """
    dtype = _DEPTH_DTYPES.get(raw.encoding)
    if dtype is None:
        raise CameraUnavailableError(f"depth encoding {raw.encoding!r} is not supported; "
                                     f"supported: {', '.join(DEPTH_ENCODINGS)}")
    px = _rows(raw, dtype, 1)[:, :, 0]
    if dtype.kind == "u":
        return px.astype(np.float32) * np.float32(0.001)
    depth = px.astype(np.float32)
    depth[~np.isfinite(depth)] = 0.0
    return depth


def encode_rgb(rgb: np.ndarray) -> RawImage:
    """An ``rgb8`` image from HxWx3 uint8."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    return RawImage("rgb8", h, w, w * 3, False, rgb.tobytes())


def encode_depth(depth_m: np.ndarray, encoding: str = "32FC1") -> RawImage:
    """A depth image from HxW metres (0 = invalid): ``32FC1`` metres or ``16UC1`` mm."""
    depth = np.asarray(depth_m, dtype=np.float32)
    h, w = depth.shape
    if encoding == "32FC1":
        return RawImage("32FC1", h, w, w * 4, False, np.ascontiguousarray(depth, dtype="<f4").tobytes())
    if encoding == "16UC1":
        mm = np.clip(np.nan_to_num(depth, nan=0.0) * 1000.0 + 0.5, 0, 65535).astype("<u2")
        return RawImage("16UC1", h, w, w * 2, False, mm.tobytes())
    raise CameraUnavailableError(f"depth encoding {encoding!r} is not supported; "
                                 f"supported: {', '.join(DEPTH_ENCODINGS)}")
