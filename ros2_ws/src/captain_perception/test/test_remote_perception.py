"""The perception node serving its segmenter over real rclpy (Fast DDS, isolated domain):
in-process and remote answers identical on recorded frames, clean failures when the node
is killed, and two client processes sharing one node."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA, CameraFrame

pytestmark = [pytest.mark.ros, pytest.mark.sim]

ROOT = Path(__file__).resolve().parents[4]
PROMPTS = ((HEAD_CAMERA, "red cube"), (HEAD_CAMERA, "plate"), (WRIST_CAMERA, "blue cube"),
           (HEAD_CAMERA, "black bowl"))


@contextlib.contextmanager
def _domain():
    sys.path.insert(0, str(ROOT / "tests" / "ros"))
    from stack_support import isolated_domain

    with isolated_domain() as did:
        yield did


class NodeProcess:
    """A node's module run as its own process (``--ros-args`` parameters, namespace, extra
    environment), ready once it prints its READY line."""

    def __init__(self, module: str, *params: str, namespace: str = "", env: dict[str, str] | None = None,
                 ready_timeout_s: float = 60.0) -> None:
        args = [sys.executable, "-m", module, "--ros-args", *[a for p in params for a in ("-p", p)]]
        if namespace:
            args += ["-r", f"__ns:={namespace}"]
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + ready_timeout_s
        try:
            while not any(line.startswith("READY") for line in self.lines):
                assert self.proc.poll() is None, "\n".join(self.lines[-30:])
                assert time.monotonic() < deadline, "\n".join(self.lines[-30:])
                time.sleep(0.05)
        except AssertionError:
            self.kill()  # never left running in the domain when it did not come up
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class ServerProcess(NodeProcess):
    """``perception_node`` as a perception server only (no harness proxy)."""

    def __init__(self, *params: str, namespace: str = "") -> None:
        super().__init__("captain_perception.nodes.perception_node", "proxy:=false", *params, namespace=namespace)


def record_frames(path: Path, seed: int = 0) -> Path:
    """Capture the tabletop scene's head and wrist frames once and save them (npz)."""
    from captain_backends.core.tabletop.driver import TabletopDriver

    driver = TabletopDriver(task="cube_on_plate", seed=seed)
    driver.configure()
    try:
        frames = driver.capture()
    finally:
        driver.shutdown()
    arrays = {}
    for name, f in frames.items():
        arrays.update({f"{name}/rgb": f.rgb, f"{name}/depth": f.depth_m, f"{name}/K": f.K,
                       f"{name}/T": f.T_base_camera, f"{name}/t": np.array(f.time_s)})
    np.savez_compressed(path, **arrays)
    return path


def load_frames(path: Path) -> dict[str, CameraFrame]:
    """The frames ``record_frames`` saved."""
    data = np.load(path)
    names = sorted({k.split("/")[0] for k in data.files})
    return {n: CameraFrame(name=n, rgb=data[f"{n}/rgb"], depth_m=data[f"{n}/depth"], K=data[f"{n}/K"],
                           T_base_camera=data[f"{n}/T"], time_s=float(data[f"{n}/t"])) for n in names}


def answers(segmenter, frames: dict[str, CameraFrame]) -> list:
    """Each prompt's segments (mask, score, label, evidence as JSON) or the failure's class and message."""
    from captain_perception.core.errors import PerceptionError
    from captain_perception.core.pointcloud import FrameCloud

    out = []
    for camera, text in PROMPTS:
        try:
            segs = segmenter.segment(FrameCloud(frames[camera]), text, 5)
            out.append([(s.mask.copy(), s.score, s.label, json.dumps(s.evidence, sort_keys=True, default=float))
                        for s in segs])
        except PerceptionError as exc:
            out.append((type(exc).__name__, str(exc)))
    return out


def assert_same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if isinstance(x, tuple):
            assert x == y
            continue
        assert len(x) == len(y)
        for (mx, sx, lx, ex), (my, sy, ly, ey) in zip(x, y, strict=True):
            assert mx.shape == my.shape and np.array_equal(mx, my)
            assert sx == sy and lx == ly and ex == ey


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> dict[str, CameraFrame]:
    return load_frames(record_frames(tmp_path_factory.mktemp("frames") / "tabletop.npz"))


@pytest.fixture(scope="module")
def server():
    with _domain():
        proc = ServerProcess("queue_size:=4", "request_timeout_s:=20.0")
        try:
            yield proc
        finally:
            proc.stop()


def test_remote_answers_equal_in_process_ones(server, frames):
    from captain_perception.core.remote import RemoteSegmenter
    from captain_perception.core.segmenters import ClassicalSegmenter
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    local = answers(ClassicalSegmenter(), frames)
    assert any(isinstance(a, list) and a for a in local), "the recorded frames ground no prompt"
    assert any(isinstance(a, tuple) and a[0] == "NothingFoundError" for a in local)  # black bowl: absent
    for use_action in (True, False):
        transport = RosPerceptionTransport(use_action=use_action)
        try:
            remote = answers(RemoteSegmenter(transport, "classical", timeout_s=20.0), frames)
        finally:
            transport.close()
        assert_same(local, remote)


def _strip_ids(value):
    if isinstance(value, dict):
        return {k: _strip_ids(v) for k, v in value.items() if k not in ("detection_id", "budget",
                                                                       "observation_handle")}
    if isinstance(value, list):
        return [_strip_ids(v) for v in value]
    return value


def test_segment_call_is_the_same_in_process_and_remote(server, tmp_path, monkeypatch):
    from captain_backends.core.tabletop.driver import TabletopDriver
    from captain_harness.core.api import RobotAPI
    from captain_perception.core.primitives import build
    from captain_perception.core.remote import RemoteSegmenter

    driver = TabletopDriver(task="cube_on_plate", seed=3)
    driver.configure()
    results = {}
    try:
        for mode in ("in_process", "remote"):
            monkeypatch.setenv("CAPTAIN_PERCEPTION", mode)
            monkeypatch.setenv("CAPTAIN_PERCEPTION_TIMEOUT_S", "20")
            perception = build(driver, tmp_path / mode)
            assert isinstance(perception.segmenter, RemoteSegmenter) == (mode == "remote")
            api = RobotAPI()
            api.register_object(perception)
            handle = api.call("observe").result["value"]["observation_handle"]
            results[mode] = [api.call("segment", (handle, camera, text)).result for camera, text in PROMPTS]
            perception.close()
    finally:
        driver.shutdown()
    assert any(r["success"] for r in results["in_process"])
    assert _strip_ids(results["in_process"]) == _strip_ids(results["remote"])


@pytest.mark.e2e
def test_node_killed_mid_episode_fails_calls_cleanly(server, tmp_path, monkeypatch):
    """The node dies between two requests: the next segment() fails with a reason, the
    episode goes on (mark_point, finish) and its record is whole."""
    from captain_harness.core.episode.loop import LoopConfig
    from captain_harness.core.episode.policy.replay import ReplayPolicy
    from captain_harness.core.episode.runner import EpisodeConfig, run_episode
    from captain_harness.core.episode.sandbox import SandboxConfig

    doomed = ServerProcess("request_timeout_s:=5.0", namespace="/doomed")
    monkeypatch.setenv("CAPTAIN_PERCEPTION", "remote")
    monkeypatch.setenv("CAPTAIN_PERCEPTION_NAMESPACE", "/doomed")
    monkeypatch.setenv("CAPTAIN_PERCEPTION_TIMEOUT_S", "4")
    cells = [
        "h = robot.observe()['value']['observation_handle']\nr = robot.segment(h, 'agentview', 'red cube')\n"
        "print('FIRST', r['success'], r['value']['backend'])",
        "r = robot.segment(h, 'agentview', 'red cube')\nprint('SECOND', r['success'], r['failure_category'])\n"
        "print('REASON', r['message'])",
        "print('THIRD', robot.mark_point(h, 'agentview', 0.5, 0.5)['success'])",
        "robot.finish()",
    ]

    def kill_before_second(index: int, _snapshot: object) -> None:
        if index == 2:
            doomed.kill()

    config = EpisodeConfig(loop=LoopConfig(cell_timeout_s=60.0), sandbox=SandboxConfig(isolation="none"))
    try:
        outcome = run_episode("tabletop/cube_on_plate", policy=ReplayPolicy.from_cells(cells),
                              out_dir=tmp_path / "records", config=config, before_request=kill_before_second)
    finally:
        doomed.kill()
    assert doomed.proc.returncode == -signal.SIGKILL
    record = Path(outcome.record_dir)
    events = [json.loads(x) for x in (record / "events.jsonl").read_text().splitlines()]
    text = json.dumps(events)
    assert outcome.error is None and outcome.requests == len(events) >= 4, outcome
    assert "FIRST True classical" in text
    assert "SECOND False not_available" in text, text[-2000:]
    assert "the perception node is not available" in text and "down or stalled" in text
    assert "THIRD True" in text
    assert (record / "rows.jsonl").is_file()


@pytest.mark.e2e
@pytest.mark.slow
def test_two_harness_processes_share_one_node(server, tmp_path):
    """Two harness nodes (own processes, namespaces /h1 and /h2, tabletop scenes) segment
    at the same time through the one perception node; each gets its own scene's answers."""
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    sys.path.insert(0, str(ROOT / "tests" / "ros"))
    from stack_support import Client

    env = {"CAPTAIN_PERCEPTION": "remote", "CAPTAIN_PERCEPTION_NAMESPACE": "", "CAPTAIN_PERCEPTION_TIMEOUT_S": "30",
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    params = ("driver:=tabletop", "camera_rate_hz:=0.0", "joint_states_rate_hz:=5.0", "wrench_rate_hz:=5.0",
              "tf_rate_hz:=5.0")
    probe = RosPerceptionTransport()
    # a new participant discovers the node's service first: seconds on a loaded machine
    served_before = probe.describe(timeout_s=30.0)["served"]
    harnesses = [NodeProcess("captain_harness.nodes.harness_node", *params, f"seed:={seed}", namespace=ns,
                             env=env, ready_timeout_s=120.0) for ns, seed in (("/h1", 0), ("/h2", 5))]
    clients = [Client(namespace=ns) for ns in ("/h1", "/h2")]
    results: dict[int, list] = {0: [], 1: []}
    try:
        handles = [c.robot_call("observe")["value"]["observation_handle"] for c in clients]

        def work(k: int) -> None:
            for _ in range(3):
                results[k].append(clients[k].robot_call("segment", observation_handle=handles[k], camera=HEAD_CAMERA,
                                                        text="red cube"))

        threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        served_after = probe.describe(timeout_s=30.0)["served"]
    finally:
        for c in clients:
            c.close()
        for h in harnesses:
            h.stop()
        probe.close()
    for k in (0, 1):
        assert len(results[k]) == 3 and all(r["success"] for r in results[k]), results[k]
        assert {r["value"]["backend"] for r in results[k]} == {"classical"}
        positions = [tuple(r["value"]["detections"][0]["position_m"]) for r in results[k]]
        assert len(set(positions)) == 1  # the same frame answers the same every time
    # two different layouts: each harness got the answer of its own scene
    first = [results[k][0]["value"]["detections"][0]["position_m"] for k in (0, 1)]
    assert first[0] != first[1]
    assert served_after - served_before >= 6


@pytest.mark.e2e
@pytest.mark.slow
def test_two_sim_stacks_share_one_node(server, monkeypatch):
    """Two `captain bringup sim` stacks (namespaces /s1 and /s2, each its own processes)
    whose harnesses segment through the one perception node in the root namespace."""
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    sys.path.insert(0, str(ROOT / "tests" / "ros"))
    from stack_support import Client, Stack

    monkeypatch.setenv("CAPTAIN_PERCEPTION", "remote")
    monkeypatch.setenv("CAPTAIN_PERCEPTION_NAMESPACE", "/")
    monkeypatch.setenv("CAPTAIN_PERCEPTION_TIMEOUT_S", "30")
    probe = RosPerceptionTransport()
    # a new participant discovers the node's service first: seconds on a loaded machine
    served_before = probe.describe(timeout_s=30.0)["served"]
    stacks, clients = [], []
    try:
        for ns, seed in (("s1", 0), ("s2", 5)):
            stacks.append(Stack("sim", "--namespace", ns, "--param", "harness.camera_rate_hz=0.0",
                                "--param", f"harness.seed={seed}", ready_timeout_s=240.0))
            clients.append(Client(namespace=f"/{ns}"))
        handles = [c.robot_call("observe")["value"]["observation_handle"] for c in clients]
        results: list = [None, None]

        def work(k: int) -> None:
            results[k] = clients[k].robot_call("segment", observation_handle=handles[k], camera=HEAD_CAMERA,
                                               text="red cube")

        threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        served_after = probe.describe(timeout_s=30.0)["served"]
    finally:
        for c in clients:
            c.close()
        for st in stacks:
            st.stop()
        probe.close()
    assert all(r is not None and r["success"] and r["value"]["backend"] == "classical" for r in results), \
        [r and (r["receipt"], r["message"]) for r in results]
    assert results[0]["value"]["detections"][0]["position_m"] != results[1]["value"]["detections"][0]["position_m"]
    assert served_after - served_before >= 2


@pytest.mark.parametrize("use_action", [False, True])
def test_node_killed_during_a_request(server, frames, use_action):
    """The node dies while a request is on its way or running: the call fails within its
    timeout plus the transfer grace, it does not hang: not_available (the service: no
    answer) or, for an action goal the node had accepted, timeout (a dead node and a long
    inference look alike to the client until DDS drops the node)."""
    from captain_perception.core.errors import BackendUnavailableError
    from captain_perception.core.pointcloud import FrameCloud
    from captain_perception.core.remote import PerceptionTimeoutError, RemoteSegmenter
    from captain_perception.nodes.perception_client import RosPerceptionTransport

    namespace = f"/doomed_{'action' if use_action else 'service'}"
    doomed = ServerProcess(namespace=namespace)
    transport = RosPerceptionTransport(namespace, use_action=use_action, grace_s=1.0)
    segmenter = RemoteSegmenter(transport, "classical", timeout_s=3.0)
    try:
        segmenter.segment(FrameCloud(frames[HEAD_CAMERA]), "red cube")  # connected and answering
        threading.Timer(0.005, doomed.kill).start()
        started = time.monotonic()
        with pytest.raises((BackendUnavailableError, PerceptionTimeoutError), match="perception node") as failed:
            segmenter.segment(FrameCloud(frames[HEAD_CAMERA]), "plate")
        if not use_action:
            assert isinstance(failed.value, BackendUnavailableError)
        assert time.monotonic() - started < 3.0 + 1.0 + 1.5
    finally:
        doomed.kill()
        transport.close()
