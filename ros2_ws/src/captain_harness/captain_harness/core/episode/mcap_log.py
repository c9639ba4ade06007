"""An episode as an MCAP file for Foxglove: one message per request (reasoning and code),
one per cell (its output and receipts) and the attached camera images as
``foxglove.CompressedImage``. JSON encoding throughout, timestamps in nanoseconds since
the epoch."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

_REQUEST_SCHEMA = {"type": "object", "properties": {
    "request_index": {"type": "integer"}, "reasoning": {"type": "string"}, "content": {"type": "string"},
    "code": {"type": "array", "items": {"type": "string"}}, "policy_s": {"type": "number"},
    "harness_s": {"type": "number"}}}
_CELL_SCHEMA = {"type": "object", "properties": {
    "request_index": {"type": "integer"}, "cell": {"type": "integer"}, "code": {"type": "string"},
    "output": {"type": "string"}, "receipts": {"type": "array", "items": {"type": "string"}}}}
_IMAGE_SCHEMA = {"type": "object", "properties": {
    "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
    "frame_id": {"type": "string"}, "data": {"type": "string", "contentEncoding": "base64"},
    "format": {"type": "string"}}}


class McapLog:
    """Writer of one episode's MCAP file."""

    def __init__(self, path: Path) -> None:
        from mcap.writer import CompressionType, Writer

        try:
            import zstandard  # noqa: F401

            compression = CompressionType.ZSTD
        except ImportError:
            compression = CompressionType.NONE
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._writer = Writer(self._file, compression=compression)
        self._writer.start(profile="", library="captain")
        self._channels: dict[str, int] = {}
        self._schemas = {
            "captain.Request": self._writer.register_schema("captain.Request", "jsonschema",
                                                            json.dumps(_REQUEST_SCHEMA).encode()),
            "captain.Cell": self._writer.register_schema("captain.Cell", "jsonschema",
                                                         json.dumps(_CELL_SCHEMA).encode()),
            "foxglove.CompressedImage": self._writer.register_schema("foxglove.CompressedImage", "jsonschema",
                                                                     json.dumps(_IMAGE_SCHEMA).encode()),
        }

    def _channel(self, topic: str, schema: str) -> int:
        if topic not in self._channels:
            self._channels[topic] = self._writer.register_channel(topic, "json", self._schemas[schema])
        return self._channels[topic]

    def _add(self, topic: str, schema: str, message: dict[str, Any], t_ns: int) -> None:
        self._writer.add_message(self._channel(topic, schema), log_time=t_ns, publish_time=t_ns,
                                 data=json.dumps(message, default=str).encode("utf-8"))

    def write_event(self, event: dict[str, Any], image_root: Path) -> None:
        """Log one request event (see ``loop.py``) and the images its cells attached."""
        t_ns = time.time_ns()
        cells = event.get("cells") or []
        self._add("/captain/requests", "captain.Request", {
            "request_index": event.get("request_index"), "reasoning": event.get("reasoning", ""),
            "content": event.get("content", ""), "code": [c.get("code", "") for c in cells],
            "policy_s": event.get("policy_s"), "harness_s": event.get("harness_s")}, t_ns)
        for cell in cells:
            self._add(
                "/captain/cells",
                "captain.Cell",
                {
                    "request_index": event.get("request_index"),
                    "cell": cell.get("index"),
                    "code": cell.get("code", ""),
                    "output": cell.get("output", ""),
                    "receipts": cell.get("receipts", []),
                },
                t_ns,
            )
            for path in cell.get("images") or []:
                name = Path(path).name
                camera = "wrist" if "wrist" in name else "head" if "head" in name else "attached"
                try:
                    data = (Path(image_root) / path).read_bytes()
                except OSError:
                    continue
                self._add(
                    f"/captain/images/{camera}",
                    "foxglove.CompressedImage",
                    {
                        "timestamp": {"sec": t_ns // 1_000_000_000, "nsec": t_ns % 1_000_000_000},
                        "frame_id": camera,
                        "data": base64.b64encode(data).decode("ascii"),
                        "format": "jpeg" if name.lower().endswith((".jpg", ".jpeg")) else "png",
                    },
                    t_ns,
                )

    def close(self) -> None:
        """Finish the file."""
        if not self._file.closed:
            self._writer.finish()
            self._file.close()
