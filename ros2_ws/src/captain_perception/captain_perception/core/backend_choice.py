"""Where the perception calls' segmentation and pointing backends run: in the harness's
process, or on the perception node (``captain_perception.nodes.perception_server``) through
the remote client backends (``core.remote``).

Chosen per process by the environment (the harness node, episode workers and scripts
inherit it from ``captain bringup`` or the shell):

* ``CAPTAIN_PERCEPTION``: ``in_process``, ``remote`` or ``auto`` (default). ``auto`` is
  remote for a real robot's driver (``driver.simulated`` false: ``xr1_real`` and the XR1
  twin) and for a model segmenter (``CAPTAIN_SEGMENTER`` other than ``classical``), and
  in-process otherwise (tests, the CPU demo, simulated rollouts);
* ``CAPTAIN_SEGMENTER``: the segmenter (``classical`` default, ``sam3``); remote, the
  node must serve the same one (it refuses another with the reason);
* ``CAPTAIN_PERCEPTION_NAMESPACE``: the perception node's namespace; unset: the process's
  own (``-r __ns:=...`` among its ``--ros-args``, as a launched or ``captain bringup``
  node gets it), else the root, so a stack in ``robot1`` uses ``/robot1/perception``;
  ``/`` names the root explicitly (one node shared by stacks in several namespaces);
* ``CAPTAIN_PERCEPTION_TIMEOUT_S``: per-request timeout, s (default 30);
* ``CAPTAIN_PERCEPTION_TRANSPORT``: ``auto`` (default), ``action`` (cancelled at its
  timeout, queue feedback) or ``service`` (one round trip). ``auto``: the service for the
  classical segmenter (short requests; a 512 x 512 frame pair as an action goal was slower
  and its time less even here, see ``captain bench perception -o remote=only``), the
  action for a model segmenter and for the pointing model (long requests).

In-process only (the perception node has its own parameters for these, see
``nodes.perception_params``; set remote they are refused, not ignored):

* ``CAPTAIN_SAM3_WEIGHTS``: ``sam3``'s local weights folder (node: ``sam3_weights_path``);
* ``CAPTAIN_SAM3_DEVICE``: its torch device, ``cpu`` (default), ``cuda``, ``cuda:1``
  (node: ``sam3_device``);
* ``CAPTAIN_POINTER_BASE_URL`` / ``CAPTAIN_POINTER_MODEL``: the OpenAI-compatible endpoint
  and model name of ``point()``'s pointing model (node: ``pointer_base_url`` /
  ``pointer_model``); unset, ``point()`` answers ``not_available``;
* ``CAPTAIN_POINTER_API_KEY``: bearer token for that endpoint, if it wants one;
* ``CAPTAIN_POINTER_TIMEOUT_S``: its request timeout, s (default 30).

A value that is not one of these is refused with the list of valid ones
(``InvalidPerceptionArgument``).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from captain_perception.core.errors import InvalidPerceptionArgument
from captain_perception.core.pointer import PointerConfig, PointingClient
from captain_perception.core.segmenters import SEGMENTERS, Segmenter, make_segmenter

MODES = ("auto", "in_process", "remote")
TRANSPORTS = ("auto", "action", "service")
#: in-process-only settings -> the perception node's parameter that does the same remote
IN_PROCESS_ONLY = {"CAPTAIN_SAM3_WEIGHTS": "sam3_weights_path", "CAPTAIN_SAM3_DEVICE": "sam3_device",
                   "CAPTAIN_POINTER_BASE_URL": "pointer_base_url", "CAPTAIN_POINTER_MODEL": "pointer_model",
                   "CAPTAIN_POINTER_API_KEY": "", "CAPTAIN_POINTER_TIMEOUT_S": "request_timeout_s"}


def process_namespace(argv: list[str]) -> str:
    """The namespace remap (``-r``/``--remap __ns:=/x``) among a command line's ``--ros-args``, or ""."""
    if "--ros-args" not in argv:
        return ""
    args = argv[argv.index("--ros-args") + 1:]
    for flag, value in itertools.pairwise(args):
        if flag in ("-r", "--remap") and value.startswith("__ns:="):
            return value.split(":=", 1)[1]
    return ""


def resolve_mode(driver: Any, env: Mapping[str, str] | None = None) -> str:
    """``"in_process"`` or ``"remote"`` for this driver and environment (see the module docstring)."""
    env = os.environ if env is None else env
    mode = env.get("CAPTAIN_PERCEPTION", "auto").strip() or "auto"
    if mode not in MODES:
        raise InvalidPerceptionArgument(f"CAPTAIN_PERCEPTION={mode!r} is not valid; choose one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    segmenter = env.get("CAPTAIN_SEGMENTER", "classical").strip() or "classical"
    real_robot = not bool(getattr(driver, "simulated", True))
    return "remote" if real_robot or segmenter != "classical" else "in_process"


def choose_backends(driver: Any, env: Mapping[str, str] | None = None,
                    transport: Any = None) -> tuple[Segmenter, PointingClient | None]:
    """The segmenter and pointing client of a ``Perception`` over ``driver``.

    Args:
        driver: the robot driver (its ``simulated`` flag decides ``auto``).
        env: the environment (default: ``os.environ``).
        transport: remote: the transport to use (default: the process's shared ROS one,
            started on the first request).
    """
    env = os.environ if env is None else env
    segmenter = env.get("CAPTAIN_SEGMENTER", "classical").strip() or "classical"
    if segmenter not in SEGMENTERS:
        raise InvalidPerceptionArgument(f"CAPTAIN_SEGMENTER={segmenter!r} is not valid; choose one of "
                                        f"{', '.join(SEGMENTERS)}")
    mode = resolve_mode(driver, env)
    if mode == "in_process":
        options: dict[str, Any] = {}
        if segmenter == "sam3":
            options = {"weights_path": env.get("CAPTAIN_SAM3_WEIGHTS") or None,
                       "device": env.get("CAPTAIN_SAM3_DEVICE", "").strip() or "cpu"}
        elif env.get("CAPTAIN_SAM3_WEIGHTS", "").strip() or env.get("CAPTAIN_SAM3_DEVICE", "").strip():
            raise InvalidPerceptionArgument(
                f"CAPTAIN_SAM3_WEIGHTS / CAPTAIN_SAM3_DEVICE are set but CAPTAIN_SEGMENTER={segmenter!r}; set "
                "CAPTAIN_SEGMENTER=sam3 to use SAM 3, or unset them")
        return make_segmenter(segmenter, **options), pointer_from_env(env)
    used = [k for k in IN_PROCESS_ONLY if env.get(k, "").strip()]
    if used:
        node = ", ".join(IN_PROCESS_ONLY[k] for k in used if IN_PROCESS_ONLY[k])
        raise InvalidPerceptionArgument(
            f"{', '.join(used)} configure in-process backends, but perception runs on the perception node "
            f"(CAPTAIN_PERCEPTION={env.get('CAPTAIN_PERCEPTION', 'auto') or 'auto'} resolves to remote): set the "
            f"node's parameters ({node or 'none needed'}) instead and unset these, or set "
            "CAPTAIN_PERCEPTION=in_process")
    timeout_s = _seconds(env, "CAPTAIN_PERCEPTION_TIMEOUT_S")
    kind = env.get("CAPTAIN_PERCEPTION_TRANSPORT", "auto").strip() or "auto"
    if kind not in TRANSPORTS:
        raise InvalidPerceptionArgument(f"CAPTAIN_PERCEPTION_TRANSPORT={kind!r} is not valid; choose one of "
                                        f"{', '.join(TRANSPORTS)}")
    segment_transport = point_transport = transport
    if transport is None:
        from captain_perception.nodes.perception_client import LazyTransport

        namespace = env.get("CAPTAIN_PERCEPTION_NAMESPACE")
        if namespace is None:
            namespace = process_namespace(sys.argv)
        segment_action = kind == "action" or (kind == "auto" and segmenter != "classical")
        segment_transport = LazyTransport(namespace, use_action=segment_action)
        point_transport = LazyTransport(namespace, use_action=kind != "service")
    from captain_perception.core.remote import RemotePointer, RemoteSegmenter

    client_id = f"pid{os.getpid()}"
    return (RemoteSegmenter(segment_transport, segmenter, timeout_s=timeout_s, client_id=client_id),
            RemotePointer(point_transport, timeout_s=timeout_s, client_id=client_id))


def _seconds(env: Mapping[str, str], key: str, default: str = "30") -> float:
    raw = env.get(key, default).strip() or default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise InvalidPerceptionArgument(f"{key}={raw!r} must be a number of seconds in (0, 3600]")
    return value


def pointer_from_env(env: Mapping[str, str] | None = None) -> PointingClient:
    """The in-process pointing client the ``CAPTAIN_POINTER_*`` settings describe (see the
    module docstring); without ``CAPTAIN_POINTER_BASE_URL`` an unconfigured one, whose
    ``point()`` answers ``not_available`` naming these settings."""
    env = os.environ if env is None else env
    base_url = env.get("CAPTAIN_POINTER_BASE_URL", "").strip()
    model = env.get("CAPTAIN_POINTER_MODEL", "").strip()
    if base_url and not base_url.startswith(("http://", "https://")):
        raise InvalidPerceptionArgument(f"CAPTAIN_POINTER_BASE_URL={base_url!r} must be an http:// or https:// URL "
                                        "of an OpenAI-compatible API root, e.g. http://localhost:8001/v1")
    if bool(base_url) != bool(model):
        missing = "CAPTAIN_POINTER_MODEL" if base_url else "CAPTAIN_POINTER_BASE_URL"
        raise InvalidPerceptionArgument(f"the pointing model needs both CAPTAIN_POINTER_BASE_URL and "
                                        f"CAPTAIN_POINTER_MODEL; {missing} is not set")
    return PointingClient(PointerConfig(base_url=base_url, model=model,
                                        api_key=env.get("CAPTAIN_POINTER_API_KEY", "").strip(),
                                        timeout_s=_seconds(env, "CAPTAIN_POINTER_TIMEOUT_S")))
