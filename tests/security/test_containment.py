"""Containment battery: what a confused or adversarial cell plants cannot reach the host,
every record survives, and the next cell runs.

Real bubblewrap sessions, real episodes on the mock driver with the real perception
``observe()`` (frames written by the host, copied into the workspace by the session).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import (
    RawChatServer,
    check_records,
    digest,
    make_canary,
    needs_bwrap,
    needs_root,
    plant,
)

from captain_backends.core.driver import TaskInfo
from captain_harness.core.api import RobotAPI, primitive
from captain_harness.core.budget import BudgetLimits
from captain_harness.core.episode.backend import Backend, BackendRequest, default_backend
from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.loop import LoopConfig
from captain_harness.core.episode.policy.openai_client import parse_completion
from captain_harness.core.episode.policy.registry import PolicySpec
from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.records import ImageStore
from captain_harness.core.episode.router import CallRouter
from captain_harness.core.episode.runner import EpisodeConfig, client_specs, run_episode
from captain_harness.core.episode.sandbox import SandboxConfig, SandboxSession, workspace_usage
from captain_harness.core.results import CallOutcome, ok

pytestmark = [pytest.mark.security, needs_bwrap]

SESSION_WS = "/data/captain/episodes/security/workspace"


def _session(tmp_path: Path, specs: list | None = None, **overrides) -> SandboxSession:
    cfg = SandboxConfig(session_workspace=SESSION_WS, log_path=tmp_path / "session.log",
                        interrupt_grace_s=2.5, **overrides)
    session = SandboxSession(tmp_path / "workspace", specs or [], cfg, published=tmp_path / "published")
    session.start()
    return session


class _Echo:
    """Answers robot calls like a router with one published frame per ``observe``."""

    def __init__(self, published: Path) -> None:
        self.published = published
        self.calls = 0

    def __call__(self, name: str, args: list, kwargs: dict) -> dict:
        self.calls += 1
        result = {"success": True, "executed": False, "failure_category": None, "message": "",
                  "value": {"n": self.calls}, "diagnostics": {}, "budget": {}}
        return {"result": result, "receipt": f"{name}: ok"}


# ------------------------------------------------------------------ episodes
def test_entries_planted_at_every_name_the_host_writes_leave_host_and_records_intact(tmp_path: Path) -> None:
    canary, canary_digest = make_canary(tmp_path)
    canary2, canary2_digest = make_canary(tmp_path, "canary2.txt")
    episode = "security_plant"
    workspace = tmp_path / "records" / "episodes" / episode / "workspace"
    planted: dict[str, str] = {}

    def plant_before(index: int, _context: object) -> None:
        if index != 2:
            return None
        # the next frames observe() writes, the files the host published at the start, and
        # the record names, each with something the host must never open or follow
        for name, kind, target in (
            ("obs_002_head.png", "symlink", canary), ("obs_002_wrist.png", "hardlink", canary2),
            ("obs_003_head.png", "fifo", None), ("obs_003_wrist.png", "device", None),
            ("obs_004_head.png", "directory", None), ("obs_004_wrist.png", "symlink", canary),
            ("TASK.md", "symlink", canary), ("rows.jsonl", "symlink", canary),
            ("outcome.json", "fifo", None), ("session.log", "hardlink", canary2),
        ):
            if plant(workspace / name, kind, target):
                planted[name] = kind
        return None

    cells = [
        "r = robot.observe()\nprint(r['value']['images'])",
        # the cell plants too: a link to the host path it learnt, a FIFO, a link out of the tree
        f"import os\nos.symlink({str(canary)!r}, 'obs_005_head.png')\nos.mkfifo('obs_005_wrist.png')\n"
        "for _ in range(4):\n    print(robot.observe()['value']['images'])\n"
        "for n in ['../rows.jsonl', '../outcome.json', '/etc/passwd']:\n"
        "    try:\n        open(n, 'a').write('x')\n    except OSError as e:\n        print('refused', n)",
        "import os, stat\n"
        "kinds = {n: stat.S_IFMT(os.lstat(n).st_mode) for n in sorted(os.listdir('.'))}\n"
        "print({n: ('file' if k == stat.S_IFREG else 'dir' if k == stat.S_IFDIR else 'other') for n, k in kinds.items()"
        " if n.startswith('obs_')})\nimage(['obs_002_head.png', 'obs_003_wrist.png'])\nprint('next cell runs')",
    ]
    started = time.monotonic()
    outcome = run_episode("mock/empty", policy=ReplayPolicy.from_cells(cells), out_dir=tmp_path / "records",
                          episode_id=episode, before_request=plant_before)
    elapsed = time.monotonic() - started
    assert {"obs_002_head.png", "obs_003_head.png", "obs_004_head.png"} <= set(planted)
    assert digest(canary) == canary_digest and digest(canary2) == canary2_digest
    record = check_records(Path(outcome.record_dir))
    assert record["outcome"] == "stopped" and record["error"] is None and record["session_restarts"] == 0
    assert elapsed < 60  # no FIFO held anything up
    events = [json.loads(line) for line in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()]
    out2, out3 = events[1]["cells"][0]["output"], events[2]["cells"][0]["output"]
    assert out2.count("refused") == 3
    assert "obs_004_head.png could not be placed" in out2  # a directory has the name: said, nothing else
    assert "next cell runs" in out3 and len(events[2]["cells"][0]["images"]) == 2
    kinds = eval(out3.splitlines()[2])  # the listing the cell printed
    for name in ("obs_002_head.png", "obs_002_wrist.png", "obs_003_head.png", "obs_003_wrist.png",
                 "obs_004_wrist.png", "obs_005_head.png", "obs_005_wrist.png"):
        assert kinds[name] == "file", name  # the session's own copy replaced what was planted
        assert digest(workspace / name) == digest(workspace.parent / "published" / name)
    assert kinds["obs_004_head.png"] == "dir"


class _HangingProbe:
    """A primitive that blocks on a FIFO on the host (a robot call that never answers)."""

    def __init__(self, fifo: Path) -> None:
        self.fifo = fifo

    @primitive(group="state")
    def wait_for_robot(self) -> CallOutcome:
        """Waits until the robot answers on the FIFO (it never does), polling like a driver."""
        fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            while not os.read(fd, 1):
                time.sleep(0.05)
        finally:
            os.close(fd)
        return CallOutcome(ok({}), "wait_for_robot: ok")


def _hanging_backend(fifo: Path):
    def factory(request: BackendRequest) -> Backend:
        api = RobotAPI()
        api.register_object(_HangingProbe(fifo))
        task = TaskInfo(task_id=request.task, instruction="wait", suite="security", init_state=-1)
        return Backend(api=api, task=task, check_success=lambda: False)

    return factory


def test_a_robot_call_that_hangs_costs_at_most_its_limit_and_the_episode_keeps_its_records(
        tmp_path: Path) -> None:
    fifo = tmp_path / "robot.fifo"
    os.mkfifo(fifo)
    cfg = EpisodeConfig(loop=LoopConfig(call_timeout_s=1.5))
    started = time.monotonic()
    outcome = run_episode("security/hang", policy=ReplayPolicy.from_cells(["robot.wait_for_robot()", "print(1)"]),
                          out_dir=tmp_path / "a", backend_factory=_hanging_backend(fifo), config=cfg)
    assert time.monotonic() - started < 20
    record = check_records(Path(outcome.record_dir))
    assert record["end_reason"] == "robot_call_timeout" and record["outcome"] == "infrastructure_failure"
    assert "wait_for_robot" in record["error"] and record["requests"] == 1
    # the episode's wall time holds during a call too: then it is the budget that ran out
    cfg = EpisodeConfig(limits=BudgetLimits(max_wall_time_s=4.0), loop=LoopConfig(call_timeout_s=100.0))
    outcome = run_episode("security/hang", policy=ReplayPolicy.from_cells(["robot.wait_for_robot()"]),
                          out_dir=tmp_path / "b", backend_factory=_hanging_backend(fifo), config=cfg)
    record = check_records(Path(outcome.record_dir))
    assert record["end_reason"] == "budget_wall_time" and record["outcome"] == "budget_exhausted"
    assert record["wall_time_s"] < 4.0 + 15


def test_malformed_endpoint_answers_and_lone_surrogates_are_policy_errors_with_records(tmp_path: Path) -> None:
    bad = {
        "choices a string": {"choices": "abc"},
        "usage as text": {"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": "12"}},
        "message a list": {"choices": [{"message": []}]},
        "tool_calls a dict": {"choices": [{"message": {"tool_calls": {"a": 1}}}]},
    }
    for what, data in bad.items():
        with pytest.raises(PolicyError, match="malformed"):
            parse_completion(data)
        assert what
    deep = b'{"choices": [{"message": {"content": "x", "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}"
    for body in (json.dumps(bad["choices a string"]).encode(), json.dumps(bad["usage as text"]).encode(), deep):
        with RawChatServer(body) as server:
            spec = PolicySpec("openai", {"base_url": server.base_url, "model": "m", "max_retries": 0})
            outcome = run_episode("mock/empty", policy=spec, out_dir=tmp_path / "r")
        record = check_records(Path(outcome.record_dir))
        assert record["end_reason"] == "policy_error" and "malformed" in record["error"], record["error"]
    # a lone surrogate in the policy's code and in a cell's output: sanitised, the session survives
    cells = ["print('a\ud800b')\nx = '\udfff'", "print(len(x), repr(x))"]
    outcome = run_episode("mock/empty", policy=ReplayPolicy.from_cells(cells, reasoning="r\ud83d"),
                          out_dir=tmp_path / "s")
    record = check_records(Path(outcome.record_dir))
    assert record["error"] is None and record["session_restarts"] == 0
    text = (Path(outcome.record_dir) / "events.jsonl").read_text(encoding="utf-8")
    assert "a\ufffdb" in text and "1 '\ufffd'" in text


# ------------------------------------------------------------------- sessions
@needs_root
def test_workspace_filled_by_a_thread_between_cells_is_cut_back(tmp_path: Path) -> None:
    quota = 16 * 1024**2
    s = _session(tmp_path, workspace_quota_bytes=quota, file_bytes=4 * 1024**2, quota_poll_s=0.3)
    try:
        r = s.run_cell(1, "import threading, itertools\n"
                          "def fill():\n    for i in itertools.count():\n"
                          "        open(f'fill_{i}.bin', 'wb').write(b'x' * 2 * 1024**2)\n"
                          "threading.Thread(target=fill, daemon=True).start()", 10, _Echo(s.published))
        assert r.error is None
        time.sleep(3.0)  # the policy thinks; the thread keeps writing
        assert not s.alive()  # the watcher ended the session between cells
        r = s.run_cell(2, "print('next cell runs')", 10, _Echo(s.published))
        assert r.restarted and "quota" in r.restart_reason and r.quota_exceeded
        assert r.stdout == "next cell runs\n"
        assert workspace_usage(s.workspace).bytes <= quota
    finally:
        s.close()


def test_threads_left_behind_neither_take_nor_forge_the_channel(tmp_path: Path) -> None:
    s = _session(tmp_path)
    host = _Echo(s.published)
    try:
        r = s.run_cell(1, "import threading, time\nseen = []\n"
                          "def caller():\n    while True:\n        seen.append(robot.observe()['failure_category'])\n"
                          "def forger():\n    link = robot._state['link']\n    for k in range(2, 40):\n"
                          "        link.send({'op': 'done', 'cell': k, 'stdout': 'forged'})\n"
                          "        link.send({'op': 'call', 'id': 10**6 + k, 'cell': k - 1, 'name': 'observe',"
                          " 'args': [], 'kwargs': {}})\n        time.sleep(0.05)\n"
                          "threading.Thread(target=caller, daemon=True).start()\n"
                          "threading.Thread(target=forger, daemon=True).start()", 10, host)
        assert r.error is None
        for k in range(2, 6):
            r = s.run_cell(k, f"time.sleep(0.2)\nprint('cell {k}')", 10, host)
            assert not r.restarted and not r.timed_out and r.stdout == f"cell {k}\n", r
        r = s.run_cell(6, "print('cancelled' in seen, None in seen)", 10, host)
        assert r.stdout == "True True\n"  # refused between cells, answered while a cell runs
        assert s.restarts == 0
    finally:
        s.close()


def test_planted_files_at_attached_image_names_cost_nothing_and_dot_dot_escapes_nothing(tmp_path: Path) -> None:
    canary, canary_digest = make_canary(tmp_path)
    s = _session(tmp_path)
    try:
        ws = s.workspace
        plant(ws / "fifo.png", "fifo")
        plant(ws / "dev.png", "device")
        plant(ws / "link.png", "symlink", canary)
        plant(ws / "hard.png", "hardlink", canary)
        plant(ws / "up", "symlink", tmp_path)
        started = time.monotonic()
        r = s.run_cell(1, "image(['fifo.png', 'dev.png', 'link.png', 'hard.png', '../session.log', 'up/canary.txt',"
                          " '/etc/passwd'])\nprint('ok')", 10, _Echo(s.published))
        store = ImageStore(ws, tmp_path / "images", "images")
        refused = [store.attach(n) for n in
                   ("fifo.png", "dev.png", "link.png", "hard.png", "../session.log", "up/canary.txt",
                    "/etc/passwd", "a/../../canary.txt", "")]
        assert time.monotonic() - started < 5
        assert r.stdout == "ok\n" and all(path is None for path, _ in refused), refused
        assert digest(canary) == canary_digest
        assert not any((tmp_path / "images").iterdir())
    finally:
        s.close()


@needs_root
def test_user_namespaces_are_refused_and_session_log_is_capped(tmp_path: Path) -> None:
    s = _session(tmp_path, log_bytes=64 * 1024)
    try:
        assert s.protections.user_namespaces_blocked
        r = s.run_cell(1, "import ctypes, os, subprocess\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                          "print(libc.unshare(0x10000000), ctypes.get_errno())\n"
                          "print(subprocess.run(['unshare', '-U', 'true'], capture_output=True).returncode != 0)\n"
                          "t = __import__('threading').Thread(target=print); t.start(); t.join()\n"
                          "for _ in range(64):\n    os.write(1, b'y' * 65536)\nprint('alive')",
                       20, _Echo(s.published))
        assert r.stdout.splitlines()[:2] == ["-1 1", "True"] and r.stdout.endswith("alive\n"), r
        time.sleep(0.3)
        log = (tmp_path / "session.log").read_bytes()
        assert len(log) <= 64 * 1024 + 200 and b"capped at 65536 bytes" in log
    finally:
        s.close()


def test_argument_fuzz_from_a_cell_gives_invalid_argument_never_an_exception_or_traceback(tmp_path: Path) -> None:
    backend = default_backend(BackendRequest("mock/empty", -1, None, tmp_path / "published", SESSION_WS, "fuzz"))
    try:
        s = _session(tmp_path, specs=client_specs(backend))
        router = CallRouter(backend.api, s.workspace, SESSION_WS, 10_000, published=s.published)
        code = (
            "import math\nbad = [10**5000, -2**1100, 2**1024, float('nan'), float('inf'), -float('inf'),"
            " [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], 'x' * 2_000_000,"
            " {'a': 10**5000}, {10**5000: 1}]\n"
            "out = []\n"
            "for name in dir(robot):\n"
            "    fn = getattr(robot, name)\n"
            "    for v in bad:\n"
            "        for r in (fn(v), fn(v, v, v), fn(position=v, quaternion=v, duration_s=v, max_distance_m=v)):\n"
            "            out.append((name, type(r).__name__, r.get('success'), r.get('failure_category'),"
            " 'Traceback' in repr(r)))\n"
            "cell = robot._state['cell']\n"
            "deep = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
            "for k, v in enumerate([2**1100, deep]):\n"
            "    m = robot._state['link'].request({'op': 'call', 'id': 10**7 + k, 'cell': cell, 'name': 'hold',"
            " 'args': [v], 'kwargs': {}})\n"
            "    out.append(('raw', 'dict', m['result']['success'], m['result']['failure_category'],"
            " 'Traceback' in repr(m)))\n"
            "print(len(out), sorted({o[3] for o in out}), sum(o[1] != 'dict' or o[2] or o[4] for o in out))"
        )
        r = s.run_cell(1, code, 120, router)
        assert r.error is None and not r.restarted, r
        count, categories, bad = r.stdout.strip().rsplit(" ", 1)[0].split(" ", 1)[0], \
            r.stdout.strip().split(" ", 1)[1].rsplit(" ", 1)[0], r.stdout.strip().rsplit(" ", 1)[1]
        assert int(count) > 300 and bad == "0", r.stdout
        assert "internal_error" not in categories and "invalid_argument" in categories, categories
        assert all("Traceback" not in c.receipt for c in router.cell_calls)
        s.close()
    finally:
        if backend.close is not None:
            backend.close()
