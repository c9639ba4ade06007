"""Pointing by a vision-language model behind an OpenAI-compatible endpoint.

The paper points with Molmo2; any model served with an OpenAI-compatible
``/chat/completions`` API (vLLM, SGLang, a local server) can be used. The image is
sent as a PNG data URL with a prompt such as ``"Point to the black bowl."``; the answer
is parsed for points in the formats pointing models emit:

* Molmo: ``<point x="61.5" y="40.4" alt="...">`` and ``<points x1=".." y1=".." x2=..>``,
  percent of the image size (0..100);
* Molmo2-style ``coords="..."`` attributes: numbers on a 0..1000 scale, as
  ``x y`` pairs or ``index x y`` triples;
* JSON ``{"point": [x, y]}`` / ``[x, y]`` lists and plain ``(x, y)`` pairs: normalised
  (0..1) when all values are at most 1, else pixels of the image sent.

Without an endpoint every call fails with ``BackendUnavailableError`` that says how to
configure one. Nothing here downloads anything.
"""

from __future__ import annotations

import base64
import io
import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import numpy as np

from captain_perception.core.errors import BackendUnavailableError, NothingFoundError


@dataclass(frozen=True)
class PointerConfig:
    """Where the pointing model is served.

    Attributes:
        base_url: OpenAI-compatible API root, e.g. ``"http://localhost:8001/v1"``; empty
            means no pointing model is configured.
        model: model name the server expects (e.g. ``"allenai/Molmo2-8B"``).
        api_key: bearer token, if the server wants one.
        timeout_s: request timeout, seconds.
        prompt_template: the text sent with the image; ``{text}`` is the policy's prompt.
        max_tokens: completion length limit.
    """

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout_s: float = 30.0
    prompt_template: str = "Point to the {text}."
    max_tokens: int = 256

    @property
    def configured(self) -> bool:
        """True when an endpoint and a model are set."""
        return bool(self.base_url.strip()) and bool(self.model.strip())


@dataclass(frozen=True)
class PointAnswer:
    """Parsed pointing answer: normalised ``(u, v)`` points and the raw model text."""

    points_uv: list[tuple[float, float]]
    raw_text: str
    latency_s: float


class PointingClient:
    """Asks the configured model to point at things in an image (see the module docstring)."""

    def __init__(self, config: PointerConfig | None = None) -> None:
        self.config = config or PointerConfig()

    def point(self, rgb: np.ndarray, text: str) -> PointAnswer:
        """Points for ``text`` in an HxWx3 uint8 image, normalised to [0, 1].

        Raises:
            BackendUnavailableError: no endpoint configured, or it cannot be reached.
            NothingFoundError: the model answered without any point.
        """
        cfg = self.config
        if not cfg.configured:
            raise BackendUnavailableError(
                "point() needs a pointing model (Molmo2 in the paper) behind an OpenAI-compatible endpoint; "
                "none is configured: set CAPTAIN_POINTER_BASE_URL and CAPTAIN_POINTER_MODEL (in-process; on the "
                "perception node its parameters pointer_base_url and pointer_model), e.g. a vLLM server "
                "'http://localhost:8001/v1' serving 'allenai/Molmo2-8B'; or use mark_point() on a pixel you "
                "chose, or segment()")
        h, w = rgb.shape[:2]
        payload = {
            "model": cfg.model,
            "max_tokens": cfg.max_tokens,
            "temperature": 0.0,
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _png_base64(rgb)}},
                {"type": "text", "text": cfg.prompt_template.format(text=text)},
            ]}],
        }
        url = cfg.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        started = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=cfg.timeout_s) as resp:
                body = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:200]
            raise BackendUnavailableError(f"the pointing endpoint {url} answered HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise BackendUnavailableError(
                f"the pointing endpoint {url} cannot be reached ({exc}); check that the server runs and that "
                "CAPTAIN_POINTER_BASE_URL (node: pointer_base_url) is its API root, ending with /v1") from exc
        except json.JSONDecodeError as exc:
            raise BackendUnavailableError(f"the pointing endpoint {url} did not return JSON ({exc})") from exc
        latency = time.monotonic() - started
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise BackendUnavailableError(
                f"the pointing endpoint {url} returned no chat completion (keys: {list(body)[:6]})") from exc
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        content = str(content or "")
        points = parse_points(content, w, h)
        if not points:
            raise NothingFoundError(f"the pointing model gave no point for {text!r}; it said: {content[:160]!r}")
        return PointAnswer(points_uv=points, raw_text=content, latency_s=latency)


_NUM = r"-?\d+(?:\.\d+)?"


def parse_points(text: str, width: int, height: int) -> list[tuple[float, float]]:
    """Normalised ``(u, v)`` points in an answer (see the module docstring), in order."""
    pts: list[tuple[float, float]] = []
    # Molmo: x="..." y="..." / x1="..." y1="..." (percent)
    for m in re.finditer(rf'\bx(\d*)\s*=\s*"\s*({_NUM})\s*"\s+y\1\s*=\s*"\s*({_NUM})\s*"', text):
        x, y = float(m.group(2)), float(m.group(3))
        if 0 <= x <= 100 and 0 <= y <= 100:
            pts.append((x / 100.0, y / 100.0))
    if pts:
        return pts
    # Molmo2-style coords="..." (0..1000): pairs, or index-x-y triples
    for m in re.finditer(r'coords\s*=\s*"([^"]*)"', text):
        nums = [float(v) for v in re.findall(_NUM, m.group(1))]
        indexed = (len(nums) % 3 == 0 and len(nums) > 0
                   and [nums[i] for i in range(0, len(nums), 3)] == [float(k + 1) for k in range(len(nums) // 3)])
        if indexed:
            groups = [nums[i + 1:i + 3] for i in range(0, len(nums), 3)]
        elif len(nums) % 2 == 0:
            groups = [nums[i:i + 2] for i in range(0, len(nums), 2)]
        else:
            groups = []
        for x, y in groups:
            if 0 <= x <= 1000 and 0 <= y <= 1000:
                pts.append((x / 1000.0, y / 1000.0))
    if pts:
        return pts
    # JSON / plain pairs
    pairs = [(float(a), float(b)) for a, b in re.findall(rf"[\[(]\s*({_NUM})\s*,\s*({_NUM})\s*[\])]", text)]
    if pairs:
        if all(0 <= a <= 1 and 0 <= b <= 1 for a, b in pairs):
            return pairs
        return [(a / width, b / height) for a, b in pairs if 0 <= a <= width and 0 <= b <= height]
    return []


def _png_base64(rgb: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb[..., :3]).astype(np.uint8)).save(buf, format="PNG", compress_level=1)
    return base64.b64encode(buf.getvalue()).decode("ascii")
