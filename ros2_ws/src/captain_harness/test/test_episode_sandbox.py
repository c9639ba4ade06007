"""The sandboxed session: persistence, timeouts, restarts, and hostile cells that must fail
inside the sandbox while the host and the session go on."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from captain_harness.core.episode.isolation import bwrap_available
from captain_harness.core.episode.sandbox import SandboxConfig, SandboxSession

HAS_BWRAP = bwrap_available()
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap cannot create namespaces here")

SPECS = [{"name": "observe", "signature": "(cameras=None)", "doc": "Observe the scene."},
         {"name": "move_to", "signature": "(position=None, quaternion=None, *, speed=0.05)", "doc": "Move."}]


class Host:
    """Answers robot calls like the router does and remembers them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list, dict]] = []

    def __call__(self, name: str, args: list, kwargs: dict) -> dict:
        self.calls.append((name, args, kwargs))
        result = {"success": True, "executed": name == "move_to", "failure_category": None, "message": "",
                  "value": {"echo": args}, "diagnostics": {}, "budget": {}}
        return {"result": result, "receipt": f"{name}: ok"}


def make_session(tmp_path: Path, **overrides) -> SandboxSession:
    # a grace that a loaded machine still meets (a cell interrupted in time must not be restarted)
    settings = {"interrupt_grace_s": 2.5, **overrides}
    cfg = SandboxConfig(session_workspace="/data/captain/episodes/test/workspace",
                        log_path=tmp_path / "session.log", **settings)
    session = SandboxSession(tmp_path / "workspace", SPECS, cfg)
    session.start()
    return session


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory):
    s = make_session(tmp_path_factory.mktemp("sandbox"))
    yield s
    s.close()


def run(session: SandboxSession, code: str, timeout_s: float = 10.0, host: Host | None = None):
    return session.run_cell(1, code, timeout_s, host or Host())


def test_variables_persist_and_modules_are_preimported(session: SandboxSession) -> None:
    assert run(session, "x = 41\ndef inc(v):\n    return v + 1").error is None
    r = run(
        session,
        "import scipy.optimize, PIL.Image\nprint(type(np).__name__, math.pi > 3, callable(image))\ninc(x)",
    )
    assert r.error is None, r.error
    assert r.stdout.splitlines() == ["module True True", "42"]


def test_failing_cell_reports_a_traceback_and_the_session_survives(session: SandboxSession) -> None:
    r = run(session, "y = 5\nz = 1 / 0")
    assert "ZeroDivisionError" in r.error and '<cell 1>", line 2' in r.error
    assert "kernel" not in r.error  # the session's own frames are not shown
    assert run(session, "print(y)").stdout == "5\n"
    assert "SyntaxError" in run(session, "def (").error


def test_robot_calls_go_over_the_channel_as_json(session: SandboxSession) -> None:
    host = Host()
    r = run(
        session,
        "r = robot.move_to(np.array([0.1, 0.2, 0.3]), speed=np.float32(0.5))\nprint(r['executed'])\n"
        "print(robot.observe()['value'])\nhelp(robot.move_to)",
        host=host,
    )
    assert r.error is None, r.error
    assert host.calls[0] == ("move_to", [[0.1, 0.2, 0.3]], {"speed": 0.5})
    assert host.calls[1] == ("observe", [], {})
    assert r.stdout.startswith("True\n{'echo': []}\n")
    assert "move_to(position=None, quaternion=None, *, speed=0.05)" in r.stdout and "Move." in r.stdout
    assert r.calls == 2


def test_timeout_interrupts_the_cell_and_keeps_variables(session: SandboxSession) -> None:
    run(session, "kept = 'yes'")
    started = time.monotonic()
    r = run(session, "import time\nprint('before')\ntime.sleep(30)", timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert r.timed_out and not r.restarted
    assert "KeyboardInterrupt" in r.error and r.stdout == "before\n"
    assert run(session, "print(kept)").stdout == "yes\n"


def test_image_attaches_files_arrays_and_refuses_paths_outside(session: SandboxSession) -> None:
    r = run(
        session,
        "from PIL import Image\nImage.new('RGB', (8, 8)).save('a.png')\n"
        "image('a.png'); image(np.zeros((4, 4, 3), np.uint8)); image('/etc/hostname.png')\n"
        "image({'images': {'agentview': 'a.png', 'robot0_eye_in_hand': 'a.png'}})\n"
        "image(['a.png'])",
    )
    assert r.error is None, r.error
    assert r.images[0] == "a.png" and r.images[1].startswith("cell_001_image_") and len(r.images) == 4
    assert any("outside the workspace" in n or "does not exist" in n for n in r.notes)
    assert any("at most 4 images" in n for n in r.notes)


def test_crashed_session_restarts_with_a_reason(tmp_path: Path) -> None:
    s = make_session(tmp_path)
    try:
        run(s, "lost = 1")
        r = run(s, "import os\nos._exit(3)")
        assert r.restarted and "status 3" in r.restart_reason
        r = run(s, "import ctypes\nctypes.string_at(0)")  # a segfault in native code
        assert r.restarted and "SIGSEGV" in r.restart_reason
        r = run(s, "print(np.ones(2).sum()); lost")
        assert r.stdout == "2.0\n" and "NameError" in r.error
        assert s.restarts == 2
    finally:
        s.close()


def test_cell_that_ignores_the_interrupt_is_killed_and_replaced(tmp_path: Path) -> None:
    s = make_session(tmp_path, cpu_s=3, interrupt_grace_s=1.0)  # the grace ends before the CPU limit
    try:
        r = run(
            s,
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
            timeout_s=0.5,
        )
        assert r.timed_out and r.restarted and "did not stop" in r.restart_reason
        r = run(s, "while True:\n    pass\n", timeout_s=30)  # the CPU-time limit ends the process
        assert r.restarted and "SIGXCPU" in r.restart_reason
        assert run(s, "1 + 1").stdout == "2\n"
    finally:
        s.close()


@needs_bwrap
def test_host_files_simulator_and_privileges_are_out_of_reach(session: SandboxSession) -> None:
    p = session.protections
    assert (p.mechanism, p.filesystem, p.network, p.pid_namespace) == (
        "bwrap",
        "workspace_only",
        "none",
        True,
    )
    assert p.no_new_privs and p.uid not in (None, 0)
    project_file = Path(__file__).resolve()
    for code in (
        f"open({str(project_file)!r})",
        "open('/etc/passwd')",
        "import mujoco",
        "import captain_backends",
        "import captain_harness",
        "open('/usr/lib/evil', 'w')",
        "import os\nos.setuid(0)",
        "open('../outside.txt', 'w')",
    ):
        r = run(session, code)
        assert r.error is not None and not r.restarted, code
    r = run(session, "import os\nprint(os.getcwd(), sorted(p for p in os.listdir('/proc') if p.isdigit()))")
    assert r.stdout == "/data/captain/episodes/test/workspace ['1']\n"
    assert not (project_file.parent.parent / "outside.txt").exists()


@needs_bwrap
def test_no_network_even_to_the_host_loopback(session: SandboxSession) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        port = listener.getsockname()[1]
        r = run(session, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)")
        assert r.error is not None and ("refused" in r.error or "unreachable" in r.error)
    finally:
        listener.close()


def test_memory_exhaustion_fails_inside_the_cell(session: SandboxSession) -> None:
    r = run(session, "big = bytearray(8 * 1024**3)")
    assert "MemoryError" in r.error and not r.restarted
    assert run(session, "print('fine')").stdout == "fine\n"


@needs_bwrap
def test_fork_bomb_and_kill_attempts_stay_inside(session: SandboxSession) -> None:
    r = run(session, "import os\nwhile True:\n    os.fork()", timeout_s=10)
    assert r.error is not None and "BlockingIOError" in r.error
    for code in (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
        "import os, signal\nos.kill(-1, signal.SIGKILL)",
    ):
        run(session, code)
    assert os.getpid() > 0  # this (host) process is still running
    r = run(session, "import os\nprint(sorted(p for p in os.listdir('/proc') if p.isdigit()))")
    assert r.stdout == "['1']\n"  # the bomb's processes ended with their cell


def test_workspace_quota_and_file_size_limit(tmp_path: Path) -> None:
    s = make_session(tmp_path, workspace_quota_bytes=24 * 1024**2, file_bytes=6 * 1024**2)
    try:
        r = run(s, "open('big.bin', 'wb').write(b'x' * 8 * 1024**2)")
        assert "File too large" in r.error
        r = run(
            s,
            "i = 0\nwhile True:\n    open(f'f{i}.bin', 'wb').write(b'x' * 4 * 1024**2)\n    i += 1",
            timeout_s=20,
        )
        assert r.restarted and "quota" in r.restart_reason
        assert sum(f.stat().st_size for f in s.workspace.iterdir()) <= 24 * 1024**2
        assert run(s, "print('ok')").stdout == "ok\n"
    finally:
        s.close()


def test_forged_channel_messages_are_ignored_and_broken_frames_restart_the_session(
        session: SandboxSession) -> None:
    # a done message without the cell's token (or for another cell) does not end the cell
    r = run(session, "link = robot._state['link']\n"
                     "link.send({'op': 'done', 'cell': 1, 'stdout': 'forged'})\n"
                     "link.send({'op': 'done', 'cell': 999})\nprint('real')")
    assert not r.restarted and r.stdout == "real\n" and r.ignored_messages == 2
    deep = ("import struct, time\n"
            "body = b'{\"op\":\"call\",\"id\":1,\"name\":\"observe\",\"args\":' + b'[' * 100000 + b']' * 100000"
            " + b',\"kwargs\":{}}'\n"
            "robot._state['link']._channel.sock.sendall(struct.pack('>I', len(body)) + body)\ntime.sleep(5)")
    r = run(session, deep)
    assert r.restarted and "protocol" in r.restart_reason
    assert run(session, "print(3)").stdout == "3\n"


def test_flooding_the_channel_cannot_outlive_the_time_limit(session: SandboxSession) -> None:
    host = Host()
    started = time.monotonic()
    r = run(session, "while True:\n    robot.observe()", timeout_s=0.5, host=host)
    assert r.timed_out and time.monotonic() - started < 4 and len(host.calls) > 10


def test_fallback_without_namespaces_still_runs_and_reports(tmp_path: Path) -> None:
    s = make_session(tmp_path, isolation="none")
    try:
        assert s.protections.mechanism == "rlimits" and s.protections.filesystem == "host"
        assert s.protections.notes  # says what is not protected
        r = run(s, "big = bytearray(8 * 1024**3)")
        assert "MemoryError" in r.error
        assert run(s, "import os\nprint(os.getcwd())").stdout == f"{s.workspace}\n"
    finally:
        s.close()


def test_timeout_interrupts_even_when_the_host_ignores_sigint(tmp_path: Path) -> None:
    """A host that ignores SIGINT (as some process managers and nodes do) passes that
    disposition on to the session it starts; the per-cell timeout must still interrupt."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        s = make_session(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        r = run(s, "import time\nprint('before')\ntime.sleep(30)", timeout_s=0.5)
        assert r.timed_out and not r.restarted and "KeyboardInterrupt" in r.error
    finally:
        s.close()
