"""The pointing client against a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import numpy as np
import pytest
from _http_endpoint import ChatServer

from captain_perception.core.errors import BackendUnavailableError, NothingFoundError
from captain_perception.core.pointer import PointerConfig, PointingClient, parse_points

IMAGE = np.zeros((64, 128, 3), np.uint8)


def test_molmo_answer_round_trip():
    with ChatServer('<point x="25.0" y="50.0" alt="bowl">bowl</point>') as srv:
        client = PointingClient(PointerConfig(base_url=srv.url, model="molmo", api_key="k"))
        ans = client.point(IMAGE, "black bowl")
    assert ans.points_uv == [(0.25, 0.5)]
    path, headers, body = srv.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer k"
    content = body["messages"][0]["content"]
    assert content[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert content[1]["text"] == "Point to the black bowl."


def test_answer_without_points_is_not_found():
    with ChatServer("I cannot see that.") as srv, pytest.raises(NothingFoundError, match="cannot see"):
        PointingClient(PointerConfig(base_url=srv.url, model="m")).point(IMAGE, "unicorn")


def test_unconfigured_and_unreachable_endpoints_are_not_available():
    with pytest.raises(BackendUnavailableError, match="none is configured"):
        PointingClient().point(IMAGE, "bowl")
    with ChatServer("x") as srv:
        url = srv.url
    with pytest.raises(BackendUnavailableError, match="cannot be reached"):
        PointingClient(PointerConfig(base_url=url, model="m", timeout_s=2)).point(IMAGE, "bowl")
    with ChatServer("oops", status=500) as srv, pytest.raises(BackendUnavailableError, match="HTTP 500"):
        PointingClient(PointerConfig(base_url=srv.url, model="m")).point(IMAGE, "bowl")


@pytest.mark.parametrize(("text", "expect"), [
    ('<points x1="10" y1="20" x2="30.5" y2="40" alt="cups">cups</points>', [(0.1, 0.2), (0.305, 0.4)]),
    ('<points coords="1 500 250 2 100 900">mug</points>', [(0.5, 0.25), (0.1, 0.9)]),
    ('<points coords="500 250">mug</points>', [(0.5, 0.25)]),
    ('[{"point": [0.4, 0.6]}]', [(0.4, 0.6)]),
    ("The mug is at (64, 32).", [(0.5, 0.5)]),
])
def test_point_formats(text, expect):
    got = parse_points(text, 128, 64)
    assert len(got) == len(expect)
    for (u, v), (eu, ev) in zip(got, expect, strict=True):
        assert u == pytest.approx(eu) and v == pytest.approx(ev)
