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
  cell only, so the namespace survives an interrupted cell,
* forbids new user namespaces (a seccomp filter on ``unshare``/``clone`` with
  ``CLONE_NEWUSER``) where the kernel supports seccomp,
* copies the files the host publishes (frames, ``TASK.md``) from the read-only published
  folder into the workspace itself, as the session's own user: the host never writes
  into the workspace (see ``sandbox.py``).

The channel is read by one thread of the kernel only, which hands results to the robot
call waiting for them and everything else to the cell loop, so a thread a cell leaves
running cannot take another cell's messages. Robot calls carry the running cell's number
and are refused between cells; a cell's ``done`` carries a token the host sent with that
cell's ``exec``.

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
import platform
import queue
import resource
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

# ``python -I`` does not put the script's folder on sys.path: the channel and robot modules
# are installed next to this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contextlib

from _captain_channel import Channel, ChannelClosedError, ProtocolViolationError  # type: ignore

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
#: Exit status when the CPU-time limit is reached (the host's ``sandbox.py`` knows it).
EXIT_CPU_LIMIT = 87
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CLONE_NEWUSER = 0x10000000
#: Published files copied into the workspace at most, bytes each.
MAX_PUBLISHED_BYTES = 64 * 1024 * 1024


class Link:
    """The kernel's end of the channel: one reader thread and serialised sends.

    Results go to the robot call waiting for their id; every other message goes to the
    cell loop's inbox. ``closed`` is set when the host is gone.
    """

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._send_lock = threading.Lock()
        self._pending: dict[int, list[Any]] = {}
        self._pending_lock = threading.Lock()
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.closed = False
        # started while SIGINT is blocked, so the interrupt always reaches the cell's thread
        threading.Thread(target=self._read, name="captain-channel", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self._channel.recv()
            except (ChannelClosedError, ProtocolViolationError, OSError):
                break
            if message is None:
                continue
            if message.get("op") == "result":
                with self._pending_lock:
                    slot = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
                if slot is not None:
                    slot[1] = message
                    slot[0].set()
                continue
            self.inbox.put(message)
        self.closed = True
        with self._pending_lock:
            slots, self._pending = list(self._pending.values()), {}
        for slot in slots:
            slot[0].set()
        self.inbox.put(None)

    def send(self, message: dict[str, Any]) -> None:
        """Send one message (whole: sends of several threads never interleave)."""
        with self._send_lock:
            self._channel.send(message)

    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send a call (``message["id"]`` set) and wait for its result; None if the host is gone."""
        slot: list[Any] = [threading.Event(), None]
        with self._pending_lock:
            if self.closed:
                return None
            self._pending[message["id"]] = slot
        try:
            self.send(message)
        except (ChannelClosedError, ProtocolViolationError, OSError):
            with self._pending_lock:
                self._pending.pop(message["id"], None)
            return None
        slot[0].wait()
        return slot[1]


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

    def __init__(self, link: Link, config: dict[str, Any]) -> None:
        self.link = link
        self.config = config
        self.workspace = os.path.realpath(config.get("workspace") or os.getcwd())
        self.published = config.get("published")
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

        robot._install(self.link, specs)
        robot._state.update(publish=self.publish, cell=None)
        self.robot = robot
        self.pid = os.getpid()
        # A process forked by a cell has no channel: its robot calls fail instead of
        # interleaving with the session's messages.
        os.register_at_fork(after_in_child=lambda: robot._state.update(link=None))
        self.namespace.update(robot=robot, math=math, image=self.image)
        try:
            import numpy as np

            self.namespace["np"] = np
        except ImportError:
            pass

    # ------------------------------------------------------------- published files
    def publish(self, names: Any, replace: bool = True) -> None:
        """Copy host-published files into the workspace (``replace``: over what has the name;
        otherwise only where nothing has it). The copy goes through a new temporary file
        and a rename, so whatever the cell left at a name is replaced, never written
        through; a name that cannot be placed is reported in the cell output."""
        if not self.published or not isinstance(names, list):
            return
        for name in names:
            if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
                continue
            target = os.path.join(self.workspace, name)
            if not replace and os.path.lexists(target):
                continue
            problem = _copy_published(os.path.join(self.published, name), self.workspace, target)
            if problem:
                self.cell_notes.append(f"[{name} could not be placed in the workspace ({problem}); "
                                       f"it stays readable as {self.published}/{name}]")

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
    def run_cell(self, index: int, code: str, token: str = "") -> dict[str, Any]:
        """Execute one cell; returns the ``done`` message (with the cell's ``token``)."""
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
            self.robot._state["cell"] = index
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
            if self.robot is not None:
                self.robot._state["cell"] = None  # threads the cell left running: no more robot calls
            sys.stdout, sys.stderr = saved
            _discard_pending_sigint()
            if self.kill_strays:
                _kill_strays()
        exec_s = time.perf_counter() - started
        wait_s = float(self.robot._state["wait_s"]) if self.robot is not None else 0.0
        return {
            "op": "done",
            "cell": index,
            "token": token,
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
            message = self.link.inbox.get()
            if message is None:
                return
            op = message.get("op")
            if op == "exec":
                reply = self.run_cell(int(message.get("cell", 0)), str(message.get("code", "")),
                                      str(message.get("token", "")))
                try:
                    self.link.send(reply)
                except (ChannelClosedError, ProtocolViolationError, OSError):
                    return
            elif op == "shutdown":
                return


def _copy_published(source: str, folder: str, target: str) -> str | None:
    """Copy ``source`` (read-only published folder) to ``target`` through a temporary file
    and a rename; returns a problem in words, or None."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    tmp = None
    try:
        with os.fdopen(fd, "rb") as src:
            data = src.read(MAX_PUBLISHED_BYTES + 1)
        if len(data) > MAX_PUBLISHED_BYTES:
            return "too large"
        out, tmp = tempfile.mkstemp(dir=folder, prefix=".published-")
        with os.fdopen(out, "wb") as dst:
            dst.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        return f"{exc.strerror or type(exc).__name__}: something else has that name" \
            if isinstance(exc, (IsADirectoryError, NotADirectoryError)) else (exc.strerror or str(exc))
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return None


#: (AUDIT_ARCH, unshare, clone, clone3) syscall numbers per machine.
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}


def _block_user_namespaces() -> bool:
    """Install a seccomp filter that refuses new user namespaces (``unshare`` and ``clone``
    with ``CLONE_NEWUSER`` fail with EPERM; ``clone3`` reports ENOSYS so the C library
    falls back to ``clone``, whose flags the filter can see). True when installed."""
    arch = _SECCOMP_ARCH.get(platform.machine())
    if arch is None:
        return False
    audit, nr_unshare, nr_clone, nr_clone3 = arch
    ld, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    prog = [
        (ld, 0, 0, 4),                  # 0: A = arch
        (jeq, 1, 0, audit),             # 1: same arch -> 3
        (ret, 0, 0, eperm),             # 2: another arch (a 32-bit entry): refuse
        (ld, 0, 0, 0),                  # 3: A = syscall number
        (jge, 0, 1, 0x40000000),        # 4: x32 syscall numbers -> 5
        (ret, 0, 0, eperm),             # 5
        (jeq, 0, 1, nr_clone3),         # 6: clone3 -> 7
        (ret, 0, 0, enosys),            # 7
        (jeq, 1, 0, nr_unshare),        # 8: unshare -> 10
        (jeq, 0, 3, nr_clone),          # 9: clone -> 10, else allow (13)
        (ld, 0, 0, 16),                 # 10: A = low word of the flags
        (jset, 0, 1, _CLONE_NEWUSER),   # 11: CLONE_NEWUSER -> 12
        (ret, 0, 0, eperm),             # 12
        (ret, 0, 0, allow),             # 13
    ]
    code = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(code, len(code))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
    except OSError:
        return False


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
    report["user_namespaces_blocked"] = bool(report["no_new_privs"]) and _block_user_namespaces()
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
    link = Link(Channel(sock))
    init = link.inbox.get()
    if not init or init.get("op") != "init":
        return
    kernel = Kernel(link, config)
    kernel.setup(init.get("specs", []))
    kernel.publish(init.get("publish"), replace=False)  # TASK.md, NOTES.md, frames: only where missing
    report["python"] = sys.version.split()[0]
    report["cwd"] = os.getcwd()
    report["publish_notes"] = kernel.cell_notes
    link.send({"op": "ready", "report": report})
    kernel.serve()


if __name__ == "__main__":
    main()
