"""Backends chosen by configuration (``core.backend_choice``): the in-process pointing model
and SAM 3 from the environment, refusals of settings that would be ignored, the real code
paths of each backend through the policy API (a real local HTTP endpoint answering like an
OpenAI-compatible pointing model; the endpoint down; bad answers; a tiny SAM 3 checkpoint),
and every setting an error message names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _http_endpoint import ChatServer

from captain_perception.core import backend_choice
from captain_perception.core.backend_choice import choose_backends
from captain_perception.core.errors import BackendUnavailableError, InvalidPerceptionArgument, NothingFoundError
from captain_perception.core.pointer import PointerConfig, PointingClient
from captain_perception.core.segmenters import ClassicalSegmenter, Sam3Segmenter
from captain_perception.nodes.perception_params import SCHEMA

PACKAGE = Path(backend_choice.__file__).resolve().parents[1]


class _Sim:
    simulated = True


def test_in_process_pointer_and_sam3_come_from_the_environment(tmp_path):
    env = {"CAPTAIN_PERCEPTION": "in_process", "CAPTAIN_POINTER_BASE_URL": "http://127.0.0.1:9/v1",
           "CAPTAIN_POINTER_MODEL": "molmo", "CAPTAIN_POINTER_API_KEY": "k", "CAPTAIN_POINTER_TIMEOUT_S": "3"}
    seg, pointer = choose_backends(_Sim(), env)
    assert isinstance(seg, ClassicalSegmenter)
    assert pointer.config == PointerConfig(base_url="http://127.0.0.1:9/v1", model="molmo", api_key="k", timeout_s=3.0)
    seg, pointer = choose_backends(_Sim(), {"CAPTAIN_PERCEPTION": "in_process", "CAPTAIN_SEGMENTER": "sam3",
                                            "CAPTAIN_SAM3_WEIGHTS": str(tmp_path), "CAPTAIN_SAM3_DEVICE": "cuda:1"})
    assert isinstance(seg, Sam3Segmenter) and seg.weights_path == tmp_path and seg.device == "cuda:1"
    assert not pointer.config.configured


@pytest.mark.parametrize(("env", "named"), [
    ({"CAPTAIN_POINTER_BASE_URL": "http://h:1/v1"}, "CAPTAIN_POINTER_MODEL is not set"),
    ({"CAPTAIN_POINTER_MODEL": "m"}, "CAPTAIN_POINTER_BASE_URL is not set"),
    ({"CAPTAIN_POINTER_BASE_URL": "localhost:8001", "CAPTAIN_POINTER_MODEL": "m"}, "CAPTAIN_POINTER_BASE_URL="),
    ({"CAPTAIN_POINTER_BASE_URL": "http://h/v1", "CAPTAIN_POINTER_MODEL": "m", "CAPTAIN_POINTER_TIMEOUT_S": "-1"},
     "CAPTAIN_POINTER_TIMEOUT_S="),
    ({"CAPTAIN_SAM3_WEIGHTS": "/w"}, "CAPTAIN_SEGMENTER=sam3"),
    ({"CAPTAIN_SEGMENTER": "sam2"}, "CAPTAIN_SEGMENTER='sam2'"),
    ({"CAPTAIN_PERCEPTION": "remote", "CAPTAIN_POINTER_BASE_URL": "http://h/v1", "CAPTAIN_POINTER_MODEL": "m"},
     "pointer_base_url, pointer_model"),
    ({"CAPTAIN_PERCEPTION": "remote", "CAPTAIN_SEGMENTER": "sam3", "CAPTAIN_SAM3_WEIGHTS": "/w"},
     "sam3_weights_path"),
])
def test_settings_that_would_be_ignored_or_are_wrong_are_refused(env, named):
    env = {"CAPTAIN_PERCEPTION": "in_process", **env}
    with pytest.raises(InvalidPerceptionArgument) as err:
        choose_backends(_Sim(), env, transport=object())
    assert named in str(err.value)


def _messages(tmp_path) -> list[str]:
    """The messages of the backends' configuration failures, produced by running them."""
    out = []
    for call in (lambda: PointingClient().point(_IMAGE, "bowl"),
                 lambda: PointingClient(PointerConfig(base_url="http://127.0.0.1:9/v1", model="m",
                                                      timeout_s=1)).point(_IMAGE, "bowl"),
                 lambda: Sam3Segmenter(None).check_weights(),
                 lambda: Sam3Segmenter(tmp_path / "absent").check_weights()):
        with pytest.raises((BackendUnavailableError, NothingFoundError)) as err:
            call()
        out.append(str(err.value))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"model_type": "sam2"}')
    (tmp_path / "other" / "model.safetensors").write_bytes(b"")
    with pytest.raises(BackendUnavailableError) as err:
        Sam3Segmenter(tmp_path / "other").check_weights()
    out.append(str(err.value))
    for env in ({"CAPTAIN_PERCEPTION": "remote", "CAPTAIN_SAM3_WEIGHTS": "/w", "CAPTAIN_POINTER_API_KEY": "k"},
                {"CAPTAIN_PERCEPTION": "bogus"}, {"CAPTAIN_PERCEPTION_TRANSPORT": "x", "CAPTAIN_PERCEPTION": "remote"}):
        with pytest.raises(InvalidPerceptionArgument) as err:
            choose_backends(_Sim(), env, transport=object())
        out.append(str(err.value))
    return out


_IMAGE = __import__("numpy").zeros((32, 48, 3), "uint8")
#: snake_case words of messages that are not settings (calls, model names, a value of CAPTAIN_PERCEPTION)
_NOT_SETTINGS = {"mark_point", "measure_object_geometry", "sam3_video", "model_type", "in_process"}


def test_every_setting_an_error_message_names_exists(tmp_path):
    # the settings read from the environment: the backend chooser's, and the node's transport profile
    readers = [PACKAGE / "core" / "backend_choice.py", PACKAGE / "nodes" / "dds_profile.py"]
    read_env = {name for f in readers
                for name in re.findall(r'(?:env\.get\(|_seconds\(env, )"(CAPTAIN_[A-Z0-9_]+)"', f.read_text())}
    assert "CAPTAIN_DDS_PROFILE" in read_env
    params = {p.name for p in SCHEMA}
    messages = _messages(tmp_path)
    # and every CAPTAIN_* setting named anywhere in the package's source
    source = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    for name in set(re.findall(r"\bCAPTAIN_[A-Z0-9_]*[A-Z0-9]\b", source + "\n".join(messages))):
        assert name in read_env or name in {"CAPTAIN_PERCEPTION"}, f"{name} is named but never read"
    for msg in messages:
        msg = re.sub(r"(?<=[A-Z0-9])=[\w'.:/-]+", "=<value>", msg.replace(str(tmp_path), "<tmp>"))  # NAME=value
        for word in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", msg):
            assert word in params or word in _NOT_SETTINGS, f"{word!r} in {msg!r} is no setting"
        for word in re.findall(r"\b([a-z_0-9]+):=", msg):
            assert word in params, msg
    assert any("CAPTAIN_POINTER_BASE_URL" in m for m in messages)
    assert any("CAPTAIN_SAM3_WEIGHTS" in m for m in messages)


@pytest.mark.sim
@pytest.mark.slow
def test_point_and_segment_through_the_policy_api_on_each_backend(tmp_path, monkeypatch):
    import sys

    from captain_backends.core.tabletop.driver import TabletopDriver
    from captain_harness.core.api import RobotAPI
    from captain_perception.core.primitives import build

    sys.path.insert(0, str(Path(__file__).parent))
    from _tiny_sam3 import build_tiny_sam3

    driver = TabletopDriver(task="cube_on_plate", seed=3)
    driver.configure()
    try:
        monkeypatch.setenv("CAPTAIN_PERCEPTION", "in_process")

        def api_for(**env: str) -> tuple[RobotAPI, str]:
            for k in ("CAPTAIN_POINTER_BASE_URL", "CAPTAIN_POINTER_MODEL", "CAPTAIN_POINTER_TIMEOUT_S",
                      "CAPTAIN_SEGMENTER", "CAPTAIN_SAM3_WEIGHTS"):
                monkeypatch.delenv(k, raising=False)
            for k, v in env.items():
                monkeypatch.setenv(k, v)
            api = RobotAPI()
            api.register_object(build(driver, tmp_path / str(len(env))))
            return api, api.call("observe").result["value"]["observation_handle"]

        api, h = api_for()
        out = api.call("point", (h, "head", "red cube")).result
        assert out["failure_category"] == "not_available" and "CAPTAIN_POINTER_BASE_URL" in out["message"]
        with ChatServer('<point x="50.0" y="60.0" alt="cube">cube</point>') as srv:
            api, h = api_for(CAPTAIN_POINTER_BASE_URL=srv.url, CAPTAIN_POINTER_MODEL="molmo")
            out = api.call("point", (h, "head", "red cube")).result
            assert out["success"], out
            assert out["value"]["detections"][0]["pixel_uv"] == pytest.approx([0.5, 0.6], abs=0.01)
            assert srv.requests[0][2]["model"] == "molmo"
            url = srv.url
        api, h = api_for(CAPTAIN_POINTER_BASE_URL=url, CAPTAIN_POINTER_MODEL="molmo", CAPTAIN_POINTER_TIMEOUT_S="2")
        out = api.call("point", (h, "head", "red cube")).result  # the endpoint is down now
        assert out["failure_category"] == "not_available" and "cannot be reached" in out["message"]
        for server, category, words in ((ChatServer("I see no cube."), "not_found", "no point"),
                                        (ChatServer("", raw=b"<html>bad gateway</html>"), "not_available", "JSON"),
                                        (ChatServer("", raw=b'{"error": "x"}'), "not_available", "no chat"),
                                        (ChatServer("x", status=503), "not_available", "HTTP 503")):
            with server as srv:
                api, h = api_for(CAPTAIN_POINTER_BASE_URL=srv.url, CAPTAIN_POINTER_MODEL="molmo")
                out = api.call("point", (h, "head", "red cube")).result
            assert out["failure_category"] == category and words in out["message"], out
        # SAM 3 from a local checkpoint folder: a tiny one runs the real code path; a missing one says why
        api, h = api_for(CAPTAIN_SEGMENTER="sam3", CAPTAIN_SAM3_WEIGHTS=str(tmp_path / "absent"))
        out = api.call("segment", (h, "head", "red cube")).result
        assert out["failure_category"] == "not_available" and "CAPTAIN_SAM3_WEIGHTS" in out["message"]
        build_tiny_sam3(tmp_path / "tiny")
        api, h = api_for(CAPTAIN_SEGMENTER="sam3", CAPTAIN_SAM3_WEIGHTS=str(tmp_path / "tiny"))
        out = api.call("segment", (h, "head", "red cube")).result
        assert out["success"] or out["failure_category"] == "not_found", out  # the model ran (random weights)
        if out["success"]:
            assert out["value"]["backend"] == "sam3"
    finally:
        driver.shutdown()
