"""``captain bench perception``'s remote section: the perception node's cost over ROS 2.

``captain bench perception -o remote=true`` runs the whole perception bench
(``captain_perception.bench``) and adds these figures; ``-o remote=only`` runs only them.
Without ``remote`` the bench is unchanged.

Set-up: the tabletop scene's head camera frame (512 x 512 RGB and depth, the "frame
pair" a segment request carries) is recorded once; a perception node (``perception_node``
with ``proxy:=false``, the classical segmenter, one worker) runs in its own process on an
isolated ROS domain (localhost discovery); each client is a ``RemoteSegmenter`` over
``RosPerceptionTransport``, asking ``segment(frame, "red cube")``. Every process uses the
stack's Fast DDS profile (``captain_perception.nodes.dds_profile``, as ``captain`` and the
bringup set it); ``CAPTAIN_DDS_PROFILE=off`` measures Fast DDS's defaults instead
(``remote_dds_profile`` says which: 1 or 0).

* ``remote_overhead_ms_median`` / ``_p90`` (action) and ``remote_service_overhead_ms_*``
  (service): the client's wall time per request (packing the frame, DDS both ways, the
  node's queue and unpacking the masks) less the backend's own time as the node measured
  it (``model_time_s``), over ``requests`` sequential requests after 3 warm-up ones;
  target <= 10 ms median.
* ``remote_transport_only_ms_median`` (action) and ``remote_service_transport_only_ms_median``:
  the same frame pair in a request the node refuses at once (no model running beside it):
  the transport alone;
* ``remote_reference_overhead_ms_median`` / ``_p90`` (action) and
  ``remote_reference_service_overhead_ms_*`` (service): the same, by frame reference: the
  client publishes the frame once on the camera topics (``<camera>/color/image_raw`` and
  aligned depth; the node runs with ``frame_cameras``) and each request names it by
  ``(camera, stamp)`` and carries only its calibration; ``remote_reference_service_transport_only_ms_median``:
  such a request refused at once (the transport alone);
* ``remote_round_trip_ms_median``, ``remote_model_ms_median``: the two parts;
  ``in_process_segment_ms_median``: the same segment call in this process.
* ``remote_throughput_1_client_rps``: requests per second of one client (sequential);
  ``remote_throughput_2_clients_rps``: of two client processes asking at the same time
  (``requests`` each, started together after their warm-up), first request sent to last
  answer; ``remote_2_clients_latency_ms_median``
  their per-request wall time. With one worker the node answers one request at a time,
  so two clients gain what the node's idle time between one client's requests was.

The figures are wall-clock times on this machine; on shared cores they include waiting
for a core.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

PROMPT = "red cube"


def run(remote: bool | str = False, requests: int = 40, **options: Any) -> dict[str, float]:
    """The perception bench (unless ``remote="only"``) plus the remote section when
    ``remote`` is set (see the module docstring); ``options`` go to the perception bench."""
    if remote not in (False, True, "only", "true", "false"):
        raise ValueError(f"remote must be true, false or only, got {remote!r}")
    figures: dict[str, float] = {}
    if remote != "only":
        from captain_perception.bench import run as bench_run

        figures.update(bench_run(**options))
    elif options:
        raise ValueError(f"remote=only takes no perception-bench options (got {', '.join(options)})")
    if remote in (True, "only", "true"):
        figures.update(remote_figures(requests=int(requests)))
    return figures


def _record_frame(path: Path) -> Path:
    from captain_backends.core.driver import HEAD_CAMERA
    from captain_backends.core.tabletop.driver import TabletopDriver

    driver = TabletopDriver(task="cube_on_plate", seed=0)
    driver.configure()
    try:
        f = driver.capture()[HEAD_CAMERA]
    finally:
        driver.shutdown()
    np.savez(path, rgb=f.rgb, depth=f.depth_m, K=f.K, T=f.T_base_camera, t=np.array(f.time_s), name=f.name)
    return path


_FRAMES: dict[str, Any] = {}


def _load_frame(path: str | Path) -> Any:
    """The recorded frame (one object per path and process: a frame published on the camera
    topics is referenced only while its arrays are the ones published)."""
    from captain_backends.core.driver import CameraFrame

    if str(path) in _FRAMES:
        return _FRAMES[str(path)]
    d = np.load(path)
    frame = _FRAMES[str(path)] = CameraFrame(name=str(d["name"]), rgb=d["rgb"], depth_m=d["depth"], K=d["K"],
                                             T_base_camera=d["T"], time_s=float(d["t"]))
    return frame


@contextlib.contextmanager
def _server(frame_cameras: str = "") -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-m", "captain_perception.nodes.perception_node", "--ros-args",
                             "-p", "proxy:=false", "-p", "workers:=1", "-p", "queue_size:=8",
                             "-p", f"frame_cameras:={frame_cameras}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(x) for x in proc.stdout or ()], daemon=True).start()
    try:
        deadline = time.monotonic() + 120
        while not any(x.startswith("READY") for x in lines):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the perception node did not start: " + "".join(lines[-20:]))
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _publish_until_held(transport: Any, frame: Any) -> None:
    """Publish ``frame`` on the camera topics until the node holds it (delivery is asynchronous)."""
    from captain_perception.core.remote import FRAME_NOT_HELD, PerceptionRequest

    # a real request (it runs the model once the frame is held): a refused one would be
    # refused before the node looks the frame up
    probe = PerceptionRequest(kind="segment", text=PROMPT, frame=frame, frame_ref=(frame.name, frame.time_s),
                              timeout_s=30.0)
    deadline = time.monotonic() + 30.0
    while True:
        transport.publish_frames([frame])
        time.sleep(0.1)
        if transport(probe, use_action=False).status != FRAME_NOT_HELD:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the perception node did not receive the frame published on its camera topics")


def client_timings(frame_path: str | Path, requests: int, use_action: bool = True,
                   warmup: int = 3, barrier: str = "", by_reference: bool = False) -> dict[str, list[float]]:
    """Sequential remote segment requests on the recorded frame: per request the round
    trip and the node's model time (s), and the window from the first timed request to
    the last answer. With ``barrier`` (a path), after the warm-up the client writes
    ``<barrier>.<pid>`` and starts once ``barrier`` exists. ``by_reference``: the frame is
    published on the camera topics first and every request names it (checked)."""
    from captain_perception.core.frame_refs import PublishedFrames
    from captain_perception.core.pointcloud import FrameCloud
    from captain_perception.core.remote import RemoteSegmenter
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    frame = _load_frame(frame_path)
    transport = RosPerceptionTransport(use_action=use_action, connect_timeout_s=30.0)
    # with pixels: a registry of its own that holds nothing (never by reference)
    segmenter = RemoteSegmenter(transport, "classical", timeout_s=60.0,
                                references=None if by_reference else PublishedFrames())
    try:
        if by_reference:
            _publish_until_held(transport, frame)
        for _ in range(warmup):
            segmenter.segment(FrameCloud(frame), PROMPT)
        if barrier:
            Path(f"{barrier}.{os.getpid()}").touch()
            deadline = time.monotonic() + 300
            while not Path(barrier).exists() and time.monotonic() < deadline:
                time.sleep(0.005)
        rt, model = [], []
        started = time.perf_counter()
        for _ in range(requests):
            segmenter.segment(FrameCloud(frame), PROMPT)
            if segmenter.last_timing["by_reference"] != float(by_reference):
                raise RuntimeError(f"a request went {'with pixels' if by_reference else 'by reference'}")
            rt.append(segmenter.last_timing["round_trip_s"])
            model.append(segmenter.last_timing["model_s"])
        window = time.perf_counter() - started
    finally:
        transport.close()
    return {"round_trip_s": rt, "model_s": model, "window_s": [started, started + window]}


def transport_timings(frame_path: str | Path, requests: int, use_action: bool,
                      by_reference: bool = False) -> list[float]:
    """Wall time (s) of requests carrying the recorded frame pair (``by_reference``: naming
    it) that the node refuses at once (a backend it does not serve): the transport alone."""
    from captain_perception.core.remote import PerceptionRequest
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    frame = _load_frame(frame_path)
    transport = RosPerceptionTransport(use_action=use_action, connect_timeout_s=30.0)
    request = PerceptionRequest(kind="segment", text=PROMPT, frame=frame, backend="none-such", timeout_s=30.0,
                                frame_ref=(frame.name, frame.time_s) if by_reference else None)
    out = []
    try:
        if by_reference:
            _publish_until_held(transport, frame)
        for k in range(requests + 3):
            t = time.perf_counter()
            reply = transport(request)
            if k >= 3:
                out.append(time.perf_counter() - t)
            if reply.status != "not_available":
                raise RuntimeError(f"the transport probe was answered {reply.status}: {reply.message}")
    finally:
        transport.close()
    return out


def _ms(values: list[float], q: float = 0.5) -> float:
    return float(np.quantile(values, q) * 1000.0) if values else float("nan")


def remote_figures(requests: int = 40) -> dict[str, float]:
    """The remote section's figures (see the module docstring)."""
    from captain_perception.core.pointcloud import FrameCloud
    from captain_perception.core.segmenters import ClassicalSegmenter
    from captain_perception.nodes.dds_profile import PROFILE_VARIABLES, localhost_domain, use_profile

    if requests < 1:
        raise ValueError(f"requests must be at least 1, got {requests}")
    use_profile()  # before this process's first participant; the node and clients inherit it
    profile = next((os.environ[v] for v in PROFILE_VARIABLES if os.environ.get(v)), "")
    print(f"Fast DDS profile: {profile or 'none (Fast DDS defaults)'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="captain_bench_remote_") as tmp:
        frame_path = _record_frame(Path(tmp) / "frame.npz")
        frame = _load_frame(frame_path)
        segmenter = ClassicalSegmenter()
        local = []
        for k in range(requests + 3):
            t = time.perf_counter()
            segmenter.segment(FrameCloud(frame), PROMPT)
            if k >= 3:
                local.append(time.perf_counter() - t)
        with localhost_domain(), _server(frame.name):
            bare = {kind: transport_timings(frame_path, requests, kind == "action") for kind in ("action", "service")}
            action = client_timings(frame_path, requests, use_action=True)
            service = client_timings(frame_path, requests, use_action=False)
            barrier = Path(tmp) / "go"
            procs = [subprocess.Popen([sys.executable, "-m", "captain_perception.remote_bench", str(frame_path),
                                       str(requests), str(barrier)], stdout=subprocess.PIPE, text=True)
                     for _ in range(2)]
            deadline = time.monotonic() + 300
            while len(list(Path(tmp).glob("go.*"))) < 2 and time.monotonic() < deadline:
                if any(p.poll() is not None for p in procs):
                    break
                time.sleep(0.01)
            barrier.touch()
            outs = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
            if any(p.returncode for p in procs):
                raise RuntimeError("a bench client process failed")
            bare_ref = transport_timings(frame_path, requests, False, by_reference=True)
            ref = {kind: client_timings(frame_path, requests, use_action=kind == "action", by_reference=True)
                   for kind in ("action", "service")}
    overhead = [r - m for r, m in zip(action["round_trip_s"], action["model_s"], strict=True)]
    service_overhead = [r - m for r, m in zip(service["round_trip_s"], service["model_s"], strict=True)]
    one_window = action["window_s"][1] - action["window_s"][0]
    both_window = max(o["window_s"][1] for o in outs) - min(o["window_s"][0] for o in outs)
    both_rt = [x for o in outs for x in o["round_trip_s"]]
    ref_overhead = {kind: [r - m for r, m in zip(t["round_trip_s"], t["model_s"], strict=True)]
                    for kind, t in ref.items()}
    for label, values, timings in (("action", overhead, action), ("service", service_overhead, service),
                                   ("action by reference", ref_overhead["action"], ref["action"]),
                                   ("service by reference", ref_overhead["service"], ref["service"])):
        print(f"remote {label:20s} overhead ms: median {_ms(values):.2f}  p90 {_ms(values, 0.9):.2f}  "
              f"(round trip {_ms(timings['round_trip_s']):.2f}, "
              f"model {statistics.median(timings['model_s']) * 1000:.2f})", flush=True)
    return {
        "remote_overhead_ms_median": _ms(overhead),
        "remote_overhead_ms_p90": _ms(overhead, 0.9),
        "remote_service_overhead_ms_median": _ms(service_overhead),
        "remote_service_overhead_ms_p90": _ms(service_overhead, 0.9),
        "remote_reference_overhead_ms_median": _ms(ref_overhead["action"]),
        "remote_reference_overhead_ms_p90": _ms(ref_overhead["action"], 0.9),
        "remote_reference_service_overhead_ms_median": _ms(ref_overhead["service"]),
        "remote_reference_service_overhead_ms_p90": _ms(ref_overhead["service"], 0.9),
        "remote_reference_service_transport_only_ms_median": _ms(bare_ref),
        "remote_transport_only_ms_median": _ms(bare["action"]),
        "remote_service_transport_only_ms_median": _ms(bare["service"]),
        "remote_round_trip_ms_median": _ms(action["round_trip_s"]),
        "remote_model_ms_median": _ms(action["model_s"]),
        "in_process_segment_ms_median": _ms(local),
        "remote_throughput_1_client_rps": requests / one_window,
        "remote_throughput_2_clients_rps": 2 * requests / both_window,
        "remote_2_clients_latency_ms_median": _ms(both_rt),
        "remote_requests": float(requests),
        "remote_dds_profile": float(bool(profile)),
    }


if __name__ == "__main__":
    # a client process of the two-client figure: frame file, request count -> JSON timings
    # (clocks: time.perf_counter is system-wide CLOCK_MONOTONIC on Linux, so windows compare)
    print(json.dumps(client_timings(sys.argv[1], int(sys.argv[2]), barrier=sys.argv[3] if len(sys.argv) > 3 else "")))
