"""The sandboxed session process: a small persistent Python kernel.

Run by the host (``sandbox.py``) as ``python -I kernel.py '<json config>'`` inside the
sandbox, with one end of the narrow channel inherited as a file descriptor. It

* drops privileges (an unprivileged uid, no new privileges, a process limit) when the
  host asks for it,
* builds one persistent namespace with ``robot``, ``np``, ``math`` and ``image``,
* executes cells sent by the host (the value of a trailing expression is printed, as
  in a notebook), capturing stdout and stderr, and answers with the output, the
  traceback of a failing cell and the images the cell attached with ``image()``,
* turns SIGINT (the host's per-cell timeout) into ``KeyboardInterrupt`` inside the
  cell only, so the namespace survives an interrupted cell.

Only the standard library is needed here (numpy is imported for the session when it
is installed). The harness package is not importable inside the sandbox.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import io
import json
import linecache
import math
import os
import resource
import signal
import socket
import sys
import time
import traceback
from typing import Any

# ``python -I`` does not put the script's folder on sys.path: the channel and robot modules
# are installed next to this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contextlib

from _captain_channel import Channel, ChannelClosedError  # type: ignore

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
#: Exit status when the CPU-time limit is reached (the host's ``sandbox.py`` knows it).
EXIT_CPU_LIMIT = 87
_PR_SET_NO_NEW_PRIVS = 38


class _Capture(io.TextIOBase):
    """stdout/stderr of a cell: keeps the first and last ``limit // 2`` characters."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.half = max(1, limit // 2)
        self.head: list[str] = []
        self.head_len = 0
        self.tail: list[str] = []
        self.tail_len = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            s = str(s)
        n = len(s)
        if self.head_len < self.half:
            take = s[: self.half - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            s = s[len(take):]
        if s:
            self.tail.append(s)
            self.tail_len += len(s)
            while self.tail_len > self.half and len(self.tail) > 1:
                first = self.tail.pop(0)
                self.tail_len -= len(first)
                self.dropped += len(first)
            if self.tail_len > self.half:
                extra = self.tail_len - self.half
                self.tail[0] = self.tail[0][extra:]
                self.tail_len -= extra
                self.dropped += extra
        return n

    def flush(self) -> None:
        return None

    def getvalue(self) -> str:
        middle = f"\n[... {self.dropped} characters of output dropped ...]\n" if self.dropped else ""
        return "".join(self.head) + middle + "".join(self.tail)


class Kernel:
    """The persistent namespace and the cell runner."""

    def __init__(self, channel: Channel, config: dict[str, Any]) -> None:
        self.channel = channel
        self.config = config
        self.workspace = os.path.realpath(config.get("workspace") or os.getcwd())
        self.max_images = int(config.get("max_images", 4))
        self.output_limit_chars = int(config.get("output_limit_chars", 1_000_000))
        self.cell_images: list[str] = []
        self.cell_notes: list[str] = []
        self.cell_index = 0
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.robot: Any = None
        self.pid = os.getpid()
        self.kill_strays = bool(config.get("kill_strays"))

    # ------------------------------------------------------------------ set-up
    def setup(self, specs: list[dict[str, Any]]) -> None:
        """Import the session's modules and fill the namespace."""
        import robot  # the client module installed next to this file

        robot._install(self.channel, specs)
        self.robot = robot
        self.pid = os.getpid()
        # A process forked by a cell has no channel: its robot calls fail instead of
        # interleaving with the session's messages.
        os.register_at_fork(after_in_child=lambda: robot._state.update(channel=None))
        self.namespace.update(robot=robot, math=math, image=self.image)
        try:
            import numpy as np

            self.namespace["np"] = np
        except ImportError:
            pass

    # ------------------------------------------------------------------ image()
    def image(self, x: Any) -> None:
        """Attach camera images to this cell's result (at most 4 per cell).

        ``x`` is an image file name or path in the workspace (e.g. ``"obs_003_head.png"``), a
        list of them, the ``images`` value of an ``observe()`` result, a numpy array
        (HxW or HxWx3 uint8) or a PIL image (saved as a PNG in the workspace). Images that
        cannot be attached are reported in the cell output.
        """
        for ref in self._flatten(x):
            if len(self.cell_images) >= self.max_images:
                self.cell_notes.append(f"image(): at most {self.max_images} images per cell; "
                                       f"{ref if isinstance(ref, str) else type(ref).__name__} was not "
                                       "attached")
                continue
            name = self._resolve(ref)
            if name is not None:
                self.cell_images.append(name)

    def _flatten(self, x: Any, depth: int = 0) -> list[Any]:
        if depth > 6 or x is None:
            return []
        if isinstance(x, (str, os.PathLike)):
            return [os.fspath(x)]
        if isinstance(x, dict):
            for key in ("path", "file", "image"):
                if isinstance(x.get(key), (str, os.PathLike)):
                    return [os.fspath(x[key])]
            if "images" in x:
                return self._flatten(x["images"], depth + 1)
            if isinstance(x.get("value"), dict) and "images" in x["value"]:
                return self._flatten(x["value"]["images"], depth + 1)
            out: list[Any] = []
            for value in x.values():
                out.extend(self._flatten(value, depth + 1))
            return out
        if isinstance(x, (list, tuple)):
            out = []
            for value in x:
                out.extend(self._flatten(value, depth + 1))
            return out
        return [x]

    def _resolve(self, ref: Any) -> str | None:
        if isinstance(ref, str):
            if not ref.lower().endswith(IMAGE_SUFFIXES):
                return None  # other strings in an observe() value (handles, names) are not images
            path = os.path.realpath(os.path.join(self.workspace, ref))
            if not (path == self.workspace or path.startswith(self.workspace + os.sep)):
                self.cell_notes.append(f"image(): {ref} is outside the workspace; not attached")
                return None
            if not os.path.isfile(path):
                self.cell_notes.append(f"image(): {ref} does not exist; not attached")
                return None
            return os.path.relpath(path, self.workspace)
        try:  # numpy array or PIL image: save as PNG in the workspace
            from PIL import Image

            img = ref if isinstance(ref, Image.Image) else Image.fromarray(_as_uint8(ref))
            name = f"cell_{self.cell_index:03d}_image_{len(self.cell_images)}.png"
            img.save(os.path.join(self.workspace, name))
            return name
        except Exception as exc:  # reported in the cell output, never raised from image()
            self.cell_notes.append(
                f"image(): cannot attach a {type(ref).__name__} ({exc}); pass a file name, "
                "an observe() images value, a uint8 array or a PIL image"
            )
            return None

    # -------------------------------------------------------------------- cells
    def run_cell(self, index: int, code: str) -> dict[str, Any]:
        """Execute one cell; returns the ``done`` message."""
        self.cell_index = index
        self.cell_images = []
        self.cell_notes = []
        capture = _Capture(self.output_limit_chars)
        filename = f"<cell {index}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        error = None
        interrupted = False
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = capture
        if self.robot is not None:
            self.robot._state["wait_s"] = 0.0
        started = time.perf_counter()
        try:
            _discard_pending_sigint()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            try:
                self._execute(code, filename)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        except KeyboardInterrupt as exc:
            interrupted = True
            error = _format_exception(exc)
        except BaseException as exc:  # every error of the cell is reported, SystemExit too
            error = _format_exception(exc)
        finally:
            if os.getpid() != self.pid:
                os._exit(0)  # a process forked by the cell ends with the cell, never runs the kernel loop
            sys.stdout, sys.stderr = saved
            _discard_pending_sigint()
            if self.kill_strays:
                _kill_strays()
        exec_s = time.perf_counter() - started
        wait_s = float(self.robot._state["wait_s"]) if self.robot is not None else 0.0
        return {
            "op": "done",
            "cell": index,
            "stdout": capture.getvalue(),
            "error": error,
            "interrupted": interrupted,
            "images": list(self.cell_images),
            "notes": list(self.cell_notes),
            "code_s": max(0.0, exec_s - wait_s),
        }

    def _execute(self, code: str, filename: str) -> None:
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), self.namespace)
        if last is not None:
            value = eval(compile(last, filename, "eval"), self.namespace)
            if value is not None:
                print(repr(value))

    # --------------------------------------------------------------------- loop
    def serve(self) -> None:
        """Answer ``exec`` messages until the host closes the channel."""
        while True:
            try:
                message = self.channel.recv()
            except ChannelClosedError:
                return
            if message is None:
                continue
            op = message.get("op")
            if op == "exec":
                reply = self.run_cell(int(message.get("cell", 0)), str(message.get("code", "")))
                try:
                    self.channel.send(reply)
                except ChannelClosedError:
                    return
            elif op == "shutdown":
                return


def _as_uint8(x: Any) -> Any:
    import numpy as np

    a = np.asarray(x)
    if a.dtype != np.uint8:
        a = np.clip(a * (255.0 if a.dtype.kind == "f" and a.max(initial=0) <= 1.0 else 1.0), 0, 255).astype(
            np.uint8
        )
    return a


def _format_exception(exc: BaseException) -> str:
    """The traceback of a cell's exception, without the kernel's own frames."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell "):
        tb = tb.tb_next
    if isinstance(exc, SyntaxError):
        tb = None
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")


def _kill_strays(wait_s: float = 2.0) -> None:
    """End every other process of the session (processes a cell started) and reap them.
    Only used where that set is the session's own: a PID namespace or a uid of its own."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(-1, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children left
        if pid == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)


def _discard_pending_sigint() -> None:
    """Drop a SIGINT that arrived after the cell ended (it belongs to that cell)."""
    while signal.SIGINT in signal.sigpending():
        signal.sigtimedwait({signal.SIGINT}, 0)


def _drop_privileges(config: dict[str, Any]) -> dict[str, Any]:
    """Switch to the unprivileged uid/gid, forbid regaining privileges, limit processes."""
    report: dict[str, Any] = {}
    uid, gid = config.get("uid"), config.get("gid")
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(int(gid if gid is not None else uid))
        os.setuid(int(uid))
    report["uid"] = os.getuid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        report["no_new_privs"] = libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    except OSError:
        report["no_new_privs"] = False
    nproc = config.get("max_processes")
    if nproc is not None:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))
            report["max_processes"] = int(nproc)
        except (ValueError, OSError):
            report["max_processes"] = None
    report["memory_bytes"] = resource.getrlimit(resource.RLIMIT_AS)[0]
    report["cpu_s"] = resource.getrlimit(resource.RLIMIT_CPU)[0]
    report["file_bytes"] = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        with open("/proc/net/dev") as f:
            report["network_interfaces"] = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    except OSError:
        report["network_interfaces"] = None
    return report


def _cpu_limit(signum: int, frame: Any) -> None:
    os._exit(EXIT_CPU_LIMIT)


def main() -> None:
    config = json.loads(sys.argv[1])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    # SIGINT is the per-cell timeout: it must raise KeyboardInterrupt even when the host
    # process ignored SIGINT (an ignored disposition is inherited, and Python then keeps it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # As PID 1 of its namespace the session ignores signals it has no handler for.
    signal.signal(signal.SIGXCPU, _cpu_limit)
    report = _drop_privileges(config)
    for path in reversed(config.get("site", [])):
        sys.path.insert(1, path)
    sock = socket.socket(fileno=int(config["fd"]))
    channel = Channel(sock)
    init = channel.recv()
    if not init or init.get("op") != "init":
        return
    kernel = Kernel(channel, config)
    kernel.setup(init.get("specs", []))
    report["python"] = sys.version.split()[0]
    report["cwd"] = os.getcwd()
    channel.send({"op": "ready", "report": report})
    kernel.serve()


if __name__ == "__main__":
    main()
