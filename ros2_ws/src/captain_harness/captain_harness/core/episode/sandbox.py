"""The sandboxed, persistent Python session of one episode (host side).

The session is its own process (``kernel.py``), started under bubblewrap when it is
available:

* filesystem: a fresh root with only ``/usr``, the Python runtime, numpy/scipy/Pillow
  and the session's three files mounted read-only, the episode workspace mounted
  read-write as the working directory (at a neutral path such as
  ``/data/captain/episodes/<episode>/workspace``), small size-limited tmpfs on ``/tmp``
  and ``/dev/shm``; the project, the simulator packages and every other host path are
  absent;
* namespaces: no network (loopback only), own PID, IPC and UTS namespaces, killed with
  its parent;
* identity: an unprivileged uid of its own (when the host runs as root), no new
  privileges (set-uid binaries do not elevate);
* resource limits: address space, CPU time, file size, open files and processes, plus a
  workspace disk quota watched by the host.

Where namespaces are not permitted the session still runs with what is available
(resource limits, the uid drop, a network namespace via ``unshare`` if possible) and
``protections`` says which protections are active.

The OS mechanisms (bubblewrap command line, resource limits, uid) are in
``isolation.py``. The only way out of the session is the narrow channel (``channel.py``): robot calls as
JSON messages, answered by the host's call handler. A cell that runs past its timeout
is interrupted with SIGINT (the namespace survives); one that does not stop within a
grace period, or a session process that dies, is replaced by a fresh one and the cell
output says so.

The host's invariant
--------------------
**The host never opens, follows, writes or blocks on anything inside the
session-writable tree** (the workspace). Concretely:

* Files the host produces for the session (camera frames, ``TASK.md``, ``NOTES.md``'s
  template) are written into a host-only *published* folder beside the workspace. The
  session sees that folder read-only (a read-only bind mount under bubblewrap; a folder
  the session's uid cannot write otherwise), and the kernel copies each published file
  into the workspace itself, as the session's uid, through a temporary file and a
  rename. A link, FIFO, device node or directory the session plants at a frame's name
  can therefore only affect the session's own view.
* Records (rows, events, outcome, frames, ``session.log``) are written only outside the
  workspace, where the session cannot write.
* The host reads workspace files only to attach images a cell asks for, through
  ``records.read_workspace_file``: every component opened relative to a directory fd
  with ``O_NOFOLLOW``, the file with ``O_PATH`` first (no open side effects on devices or
  FIFOs), checked to be a regular file with one link, then reopened read-only.
* The quota walk uses only directory fds (``O_NOFOLLOW``) and ``lstat``-like calls, is
  bounded in depth and entries, and removes files with ``unlinkat`` relative to its
  directory fds.

Further limits that hold whatever a cell does: every robot call runs under a host-side
wall-clock limit (``deadline.py``); the workspace quota is checked after every cell and
by a watcher thread every second (over quota: the session is ended and restarted, the
largest files it wrote are removed, the cell output and the record say so);
``session.log`` is capped (``SandboxConfig.log_bytes``); new user namespaces are refused
by a seccomp filter in the kernel; channel messages that do not come from the running
cell (stale threads, forged ``done`` messages without the cell's token) are ignored.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from captain_harness.core.episode import isolation as iso
from captain_harness.core.episode.channel import Channel, ChannelClosedError, ProtocolViolationError
from captain_harness.core.episode.deadline import call_deadline
from captain_harness.core.episode.errors import RobotCallTimeoutError, SessionError

_log = logging.getLogger(__name__)

#: Signature of the host's handler of one robot call: (name, args, kwargs) -> message
#: with ``result`` (the result dict), ``receipt`` and optionally ``publish`` (names of
#: published files the call wrote, for the session to copy into its workspace).
CallHandler = Callable[[str, list, dict], dict]

#: The quota walk visits at most this many entries and this many folder levels; a
#: workspace past either counts as over quota.
MAX_WORKSPACE_ENTRIES = 100_000
MAX_WORKSPACE_DEPTH = 64


@dataclass
class SandboxConfig:
    """Limits and isolation of the session.

    Attributes:
        isolation: ``"auto"`` (bubblewrap when it works, else the fallback), ``"bwrap"``
            (fail if bubblewrap does not work) or ``"none"`` (resource limits and the uid
            drop only).
        memory_bytes: address-space limit of the session process (RLIMIT_AS).
        cpu_s: CPU-time limit of the session process over its lifetime (RLIMIT_CPU), s.
        file_bytes: largest file the session may write (RLIMIT_FSIZE).
        max_processes: processes/threads of the session's uid (RLIMIT_NPROC).
        max_open_files: RLIMIT_NOFILE.
        workspace_quota_bytes: disk space the workspace may hold; checked while a cell
            runs and after it.
        tmp_bytes: size of the session's ``/tmp`` and ``/dev/shm`` (bubblewrap only).
        interrupt_grace_s: how long an interrupted cell may take to stop before the
            session is killed and restarted, s.
        startup_timeout_s: how long a new session may take to report ready, s.
        drop_uid: run the session under an unprivileged uid of its own when the host is
            root (``None``: when possible).
        site_modules: top-level modules importable in the session besides the standard
            library.
        session_workspace: the workspace path as the session sees it (bubblewrap only);
            ``None`` keeps the host path.
        log_path: file receiving the session process's own stdout/stderr (start-up
            errors); ``None`` discards them.
        log_bytes: the most that file receives from the session, bytes; later output is
            discarded and the file says so.
        quota_poll_s: period of the workspace-quota watcher, s (0: only around cells).
    """

    isolation: str = "auto"
    memory_bytes: int = 4 * 1024**3
    cpu_s: int = 1800
    file_bytes: int = 64 * 1024**2
    max_processes: int = 64
    max_open_files: int = 256
    workspace_quota_bytes: int = 512 * 1024**2
    tmp_bytes: int = 64 * 1024**2
    interrupt_grace_s: float = 3.0
    startup_timeout_s: float = 60.0
    drop_uid: bool | None = None
    site_modules: tuple[str, ...] = ("numpy", "scipy", "PIL")
    session_workspace: str | None = None
    log_path: Path | None = None
    log_bytes: int = 256 * 1024
    quota_poll_s: float = 1.0


@dataclass
class Protections:
    """Which protections hold for a running session (reported in the episode record)."""

    mechanism: str = "none"              # "bwrap" or "rlimits"
    filesystem: str = "host"             # "workspace_only" (project and host paths hidden) or "host"
    network: str = "host"                # "none" (own empty namespace) or "host"
    pid_namespace: bool = False
    uid: int | None = None
    no_new_privs: bool = False
    memory_bytes: int | None = None
    cpu_s: int | None = None
    file_bytes: int | None = None
    max_processes: int | None = None
    workspace_quota_bytes: int | None = None
    user_namespaces_blocked: bool = False
    session_log_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return asdict(self)


@dataclass
class CellRun:
    """What one cell did in the session.

    Attributes:
        stdout: captured stdout and stderr (printed value of a trailing expression too).
        error: the traceback of a failing cell, or None.
        timed_out: the cell ran past its timeout and was interrupted.
        restarted: the session process was replaced during or after this cell.
        restart_reason: why, in words, or None.
        images: workspace-relative names of the images the cell attached.
        notes: messages of ``image()`` (images not attached and why).
        duration_s: wall time of the cell on the host.
        code_s: time the session spent running the cell's own code (outside robot calls).
        calls: number of robot calls the cell made.
        ignored_messages: channel messages that did not come from this cell (ignored).
        quota_exceeded: the workspace went over its quota during or after this cell.
    """

    stdout: str = ""
    error: str | None = None
    timed_out: bool = False
    restarted: bool = False
    restart_reason: str | None = None
    images: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    code_s: float = 0.0
    calls: int = 0
    ignored_messages: int = 0
    quota_exceeded: bool = False


class SandboxSession:
    """The persistent, sandboxed Python session of one episode. See the module docstring.

    Args:
        workspace: the episode's workspace folder on the host (created if missing).
        specs: the robot calls the session's ``robot`` module defines: dicts with ``name``,
            ``signature`` (text) and ``doc``.
        config: limits and isolation.
        published: the host-only folder of files published to the session (frames,
            ``TASK.md``); read-only to the session, copied into its workspace by the kernel.
            None: nothing is published.
    """

    def __init__(self, workspace: Path, specs: list[dict[str, Any]],
                 config: SandboxConfig | None = None, published: Path | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.published = Path(published).resolve() if published is not None else None
        if self.published is not None:
            self.published.mkdir(parents=True, exist_ok=True)
            os.chmod(self.published, 0o755)
            if self.published == self.workspace or self.workspace in self.published.parents:
                raise SessionError("the published folder must lie outside the workspace")
        self.specs = specs
        self.config = config or SandboxConfig()
        self.protections = Protections()
        self.kernel_report: dict[str, Any] = {}
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._pid: int | None = None  # host pid of the kernel process
        self._channel: Channel | None = None
        self._lib_dir: Path | None = None
        self._log = None
        self._log_written = 0
        self._log_lock = threading.Lock()
        self._uid: int | None = None
        self._violation: str | None = None  # why the watcher ended the session
        self._quota_lock = threading.Lock()
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        mode = self.config.isolation
        if mode not in ("auto", "bwrap", "none"):
            raise SessionError(f"unknown isolation {mode!r}; choose 'auto', 'bwrap' or 'none'")
        if mode == "bwrap" and not iso.bwrap_ok():
            raise SessionError(
                "isolation='bwrap' but bubblewrap cannot create namespaces here; "
                "use isolation='auto' or 'none'"
            )
        self._use_bwrap = mode == "bwrap" or (mode == "auto" and iso.bwrap_ok())

    # ---------------------------------------------------------------- lifecycle
    @property
    def session_workspace(self) -> str:
        """The workspace path as code in the session sees it."""
        if self._use_bwrap and self.config.session_workspace:
            return self.config.session_workspace
        return str(self.workspace)

    @property
    def session_published(self) -> str | None:
        """The published folder's path as code in the session sees it."""
        if self.published is None:
            return None
        return iso.SESSION_PUBLISHED if self._use_bwrap else str(self.published)

    def start(self) -> Protections:
        """Start the session process; returns the protections in force."""
        self._choose_uid()
        self._spawn()
        if self.config.quota_poll_s > 0 and self.config.workspace_quota_bytes:
            self._watcher = threading.Thread(target=self._watch, name="captain-quota", daemon=True)
            self._watcher.start()
        return self.protections

    def alive(self) -> bool:
        """True while the session process runs."""
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """Stop the session process and free its resources."""
        self._watch_stop.set()
        if self._channel is not None:
            with contextlib.suppress(ChannelClosedError, ProtocolViolationError):
                self._channel.send({"op": "shutdown"})
        self._kill(wait_s=1.0)
        if self._lib_dir is not None:
            shutil.rmtree(self._lib_dir, ignore_errors=True)
            self._lib_dir = None
        with self._log_lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> SandboxSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def restart(self, reason: str) -> None:
        """Replace the session process with a fresh one (variables are lost)."""
        self._kill(wait_s=1.0)
        self.restarts += 1
        self._spawn()
        self.protections.notes.append(f"restarted: {reason}")

    # -------------------------------------------------------------------- cells
    def run_cell(self, index: int, code: str, timeout_s: float, on_call: CallHandler, *,
                 call_timeout_s: float | None = None, episode_deadline: float | None = None) -> CellRun:
        """Run one cell. Robot calls are answered by ``on_call`` while the cell runs.

        Never raises for anything the cell does: a timeout interrupts the cell, a hang past
        the grace period or a dead session process restarts the session, and the returned
        ``CellRun`` says what happened.

        Args:
            index: the cell's number (calls and ``done`` must carry it).
            code: the cell's source.
            timeout_s: the cell's time limit, s.
            on_call: answers robot calls.
            call_timeout_s: host-side wall-clock limit of one robot call, s (None: none).
            episode_deadline: ``time.monotonic()`` at which the episode's wall time ends; a
                robot call is also cut there.

        Raises:
            RobotCallTimeoutError: a robot call ran past its limit (the episode must end:
                the robot's state is unknown and the call may still be running).
        """
        run = CellRun()
        started = time.monotonic()
        if self._violation is not None or not self.alive():
            reason = self._violation or "the session process was not running"
            run.quota_exceeded = self._violation is not None
            self._violation = None
            if run.quota_exceeded:
                self._kill(wait_s=0.5)
                self._enforce_quota(run)
            self.restart(reason)
            run.restarted, run.restart_reason = True, reason
        assert self._channel is not None
        deadline = started + max(0.0, timeout_s)
        hard_deadline: float | None = None
        next_quota_check = started + 1.0
        token = secrets.token_hex(16)
        try:
            self._channel.send({"op": "exec", "cell": index, "code": code, "token": token})
            while True:
                # Deadlines and the quota are checked on every message too, so a cell that
                # floods the channel with calls cannot outlive its time limit.
                now = time.monotonic()
                if hard_deadline is None and now >= deadline:
                    run.timed_out = True
                    self._interrupt()
                    hard_deadline = now + self.config.interrupt_grace_s
                elif hard_deadline is not None and now >= hard_deadline:
                    self._crash(run, f"the cell did not stop within {self.config.interrupt_grace_s:g} s "
                                     "after it was interrupted")
                    break
                if now >= next_quota_check:
                    next_quota_check = now + 1.0
                    over = self._over_quota()
                    if over is not None:
                        run.quota_exceeded = True
                        self._crash(run, over, cleanup=True)
                        break
                wait = (hard_deadline if hard_deadline is not None else deadline) - now
                message = self._channel.recv(timeout_s=max(0.0, min(wait, 0.5)))
                if message is None:
                    if not self.alive():
                        raise ChannelClosedError("the session process ended")
                    continue
                op = message.get("op")
                if op == "call":
                    if message.get("cell") != index:
                        run.ignored_messages += 1
                        reply = _failed_reply(str(message.get("name", "robot"))[:80], "cancelled",
                                              "robot calls are answered only for the running cell; this one "
                                              "came from a thread an earlier cell left running")
                    else:
                        run.calls += 1
                        if run.timed_out:
                            reply = _timed_out_reply(str(message.get("name", ""))[:80])
                        else:
                            reply = self._handle_call(message, on_call, call_timeout_s, episode_deadline)
                    reply.update(op="result", id=message.get("id"))
                    self._channel.send(reply)
                elif (op == "done" and message.get("cell") == index
                      and hmac.compare_digest(str(message.get("token", "")), token)):
                    run.stdout = str(message.get("stdout") or "")
                    run.error = None if message.get("error") is None else str(message.get("error"))
                    run.images = [str(x) for x in message.get("images") or []][:16]
                    run.notes = [str(x)[:500] for x in message.get("notes") or []][:16]
                    try:
                        run.code_s = max(0.0, float(message.get("code_s") or 0.0))
                    except (TypeError, ValueError, OverflowError):
                        run.code_s = 0.0
                    break
                else:  # a stale or forged message (a thread of the cell): not the cell's end
                    run.ignored_messages += 1
        except (ChannelClosedError, ProtocolViolationError, OSError) as exc:
            self._crash(run, self._exit_reason(exc), cleanup=self._violation is not None)
            self._violation = None
        if run.ignored_messages:
            run.notes.append(f"[the harness ignored {run.ignored_messages} channel message(s) that did not come "
                             "from this cell (threads left running, or messages without the cell's token)]")
        if not run.restarted:
            over = self._over_quota()
            if over is not None:
                run.quota_exceeded = True
                removed = self._enforce_quota(run)
                run.notes.append(
                    f"[{over}; removed the largest files the session wrote: {', '.join(removed[:8]) or 'none'}]"
                )
        run.duration_s = time.monotonic() - started
        return run

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _handle_call(message: dict, on_call: CallHandler, call_timeout_s: float | None = None,
                     episode_deadline: float | None = None) -> dict:
        name = message.get("name")
        args = message.get("args")
        kwargs = message.get("kwargs")
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(kwargs, dict):
            return _failed_reply("robot", "invalid_argument", "malformed robot call")
        name = name[:80]
        limit, cause = call_timeout_s, "call_timeout"
        if episode_deadline is not None:
            left = max(0.05, episode_deadline - time.monotonic())
            if limit is None or left < limit:
                limit, cause = left, "wall_time"
        reply: dict | None = None
        with call_deadline(limit) as guard:
            try:
                reply = on_call(name, args, kwargs)
            except Exception as exc:  # the session only ever gets a result dict
                _log.error("robot call %s failed on the host", name, exc_info=True)
                reply = _failed_reply(name, "internal_error", f"the harness failed on this call "
                                                              f"({type(exc).__name__}); try again or use another call")
        if reply is None and guard.fired:
            raise RobotCallTimeoutError(name, guard.limit_s, cause)
        return reply if reply is not None else _failed_reply(name, "internal_error", "no answer")

    def _crash(self, run: CellRun, reason: str, cleanup: bool = False) -> None:
        self._kill(wait_s=0.5)
        if cleanup:
            run.quota_exceeded = True
            removed = self._enforce_quota(run)
            reason += f"; removed the largest files the session wrote: {', '.join(removed[:8]) or 'none'}"
        run.restarted = True
        run.restart_reason = reason
        try:
            self.restart(reason)
        except SessionError as exc:
            run.restart_reason = f"{reason}; the session could not be restarted ({exc})"

    def _exit_reason(self, exc: BaseException) -> str:
        if self._violation is not None:
            return self._violation
        if isinstance(exc, ProtocolViolationError):
            return f"the session broke the channel protocol ({exc})"
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        if code is None:
            return "the session process stopped answering"
        if code == iso.EXIT_CPU_LIMIT:
            return f"the session process reached its CPU-time limit ({self.config.cpu_s} s, SIGXCPU)"
        if code < 0 or code > 128:
            signum = -code if code < 0 else code - 128
            name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
            hint = {
                "SIGXCPU": "the CPU-time limit",
                "SIGKILL": "killed (memory or process limits, or a kill)",
                "SIGSEGV": "a crash in native code",
                "SIGXFSZ": "the file-size limit",
            }.get(name, "")
            return f"the session process was ended by {name}" + (f" ({hint})" if hint else "")
        return f"the session process exited with status {code}"

    def _interrupt(self) -> None:
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGINT)

    def _kill(self, wait_s: float) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            for pid in {self._pid, proc.pid} - {None}:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL) if pid == proc.pid else os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait_s)
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._proc = None
        self._pid = None

    # ------------------------------------------------------------ workspace quota
    def _over_quota(self) -> str | None:
        """Why the workspace is over its limits, or None."""
        quota = self.config.workspace_quota_bytes
        if not quota:
            return None
        usage = workspace_usage(self.workspace, stop_at=quota)
        if usage.problem is not None:
            return f"the workspace {usage.problem} (limit {MAX_WORKSPACE_ENTRIES} entries, " \
                   f"{MAX_WORKSPACE_DEPTH} levels)"
        if usage.bytes > quota:
            return f"the workspace holds more than its {quota / 1024**2:.0f} MiB quota"
        return None

    def _enforce_quota(self, run: CellRun | None = None) -> list[str]:
        """Delete the largest files the session wrote until the workspace fits 90 % of its
        quota (and folders past the walk's limits); returns their workspace-relative names."""
        with self._quota_lock:
            return enforce_quota(self.workspace, self.config.workspace_quota_bytes, self._uid)

    def _watch(self) -> None:
        """Watcher thread: ends the session when its workspace goes over quota (threads a
        cell left running keep writing between cells); the next cell restarts it."""
        while not self._watch_stop.wait(self.config.quota_poll_s):
            if self._violation is not None or not self.alive():
                continue
            try:
                over = self._over_quota()
            except Exception:  # the watcher must never die
                _log.exception("workspace quota check failed")
                continue
            if over is not None:
                self._violation = over
                proc, pid = self._proc, self._pid
                for target in {pid, proc.pid if proc is not None else None} - {None}:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(target, signal.SIGKILL)

    # ------------------------------------------------------------------- spawning
    def _choose_uid(self) -> None:
        drop = self.config.drop_uid
        can = os.geteuid() == 0
        if not self._use_bwrap:
            can = can and iso.world_traversable(Path(sys.base_prefix)) and iso.world_traversable(self.workspace) \
                and (self.published is None or iso.world_traversable(self.published))
        if drop is True and not can:
            raise SessionError(
                "drop_uid=True needs a root host (and, without bubblewrap, a Python runtime "
                "and workspace every user can reach); set drop_uid=None"
            )
        self._uid = iso.session_uid() if (drop is None and can) or drop else None
        if self._uid is not None:
            for root, dirs, files in os.walk(self.workspace):
                for name in [*dirs, *files]:
                    os.lchown(os.path.join(root, name), self._uid, self._uid)
            os.chown(self.workspace, self._uid, self._uid)

    def _python(self) -> tuple[str, str]:
        base = getattr(sys, "_base_executable", sys.executable)
        return os.path.realpath(base), os.path.realpath(sys.base_prefix)

    def _spawn(self) -> None:
        cfg = self.config
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        python, prefix = self._python()
        site_dirs = iso.module_dirs(cfg.site_modules)
        kernel_config: dict[str, Any] = {
            "fd": child_sock.fileno(),
            "uid": self._uid,
            "gid": self._uid,
            "max_images": 4,
            "max_processes": None,
        }
        if self._uid is not None:
            kernel_config["max_processes"] = cfg.max_processes
        kernel_config["kill_strays"] = self._use_bwrap or self._uid is not None
        info_r = info_w = None
        pass_fds = [child_sock.fileno()]
        kernel_config["published"] = self.session_published
        if self._use_bwrap:
            info_r, info_w = os.pipe()
            pass_fds.append(info_w)
            kernel_config["site"] = [iso.SESSION_SITE]
            kernel_config["workspace"] = self.session_workspace
            argv = iso.bwrap_argv(python, prefix, site_dirs, info_w, workspace=self.workspace,
                                  session_workspace=self.session_workspace, tmp_bytes=cfg.tmp_bytes,
                                  switch_uid=self._uid is not None, published=self.published)
            argv += ["--", python, "-I", f"{iso.SESSION_LIB}/_captain_kernel.py"]
        else:
            self._lib_dir = self._lib_dir or self._copy_session_files()
            kernel_config["site"] = sorted({str(Path(d).parent) for d, _ in site_dirs})
            kernel_config["workspace"] = str(self.workspace)
            argv = [python, "-I", str(self._lib_dir / "_captain_kernel.py")]
        argv.append(json.dumps(kernel_config))
        if self._log is None and cfg.log_path:
            self._log = open(cfg.log_path, "ab")  # noqa: SIM115  (host-only, outside the workspace)
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": self.session_workspace,
            "TMPDIR": "/tmp",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLCONFIGDIR": "/tmp",
        }
        nproc_fallback = None
        if self._uid is None and not self._use_bwrap and os.geteuid() != 0:
            nproc_fallback = iso.count_user_processes(os.geteuid()) + cfg.max_processes
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=str(self.workspace),
                env=env,
                pass_fds=pass_fds,
                start_new_session=True,
                preexec_fn=iso.limits_preexec(iso.ResourceLimits(cfg.memory_bytes, cfg.cpu_s, cfg.file_bytes,
                                                                 cfg.max_open_files),
                                              nproc_fallback, unshare_net=not self._use_bwrap),
            )
        except OSError as exc:
            parent_sock.close()
            child_sock.close()
            raise SessionError(f"cannot start the session process: {exc}") from exc
        finally:
            child_sock.close()
            if info_w is not None:
                os.close(info_w)
        threading.Thread(target=self._drain, args=(self._proc.stdout,), name="captain-session-log",
                         daemon=True).start()
        self._channel = Channel(parent_sock)
        self._pid = self._proc.pid
        if info_r is not None:
            self._pid = iso.read_child_pid(info_r, cfg.startup_timeout_s) or self._proc.pid
        try:
            self._channel.send({"op": "init", "specs": self.specs, "publish": self.published_names()})
            ready = self._channel.recv(timeout_s=cfg.startup_timeout_s)
        except (ChannelClosedError, ProtocolViolationError) as exc:
            ready = None
            detail = str(exc)
        else:
            detail = "no ready message in time"
        if not ready or ready.get("op") != "ready":
            self._kill(wait_s=1.0)
            raise SessionError(
                f"the session process did not start ({detail}); "
                f"see {cfg.log_path or 'SandboxConfig.log_path'} for its output"
            )
        self.kernel_report = dict(ready.get("report") or {})
        self._fill_protections(nproc_fallback)

    def published_names(self) -> list[str]:
        """Names of the regular files in the published folder."""
        if self.published is None:
            return []
        with os.scandir(self.published) as entries:
            return sorted(e.name for e in entries if e.is_file(follow_symlinks=False) and not e.name.startswith("."))

    def _drain(self, pipe: Any) -> None:
        """Copy the session's own stdout/stderr into the log, at most ``log_bytes`` in all."""
        cap = self.config.log_bytes
        try:
            while True:
                chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
                if not chunk:
                    return
                with self._log_lock:
                    log = self._log
                    if log is None or log.closed:
                        continue
                    room = cap - self._log_written
                    if room > 0:
                        log.write(chunk[:room])
                        self._log_written += min(room, len(chunk))
                        if len(chunk) >= room:
                            log.write(f"\n[session.log capped at {cap} bytes; later output of the session "
                                      "was discarded]\n".encode())
                        log.flush()
                    else:
                        self._log_written += len(chunk)
        except (OSError, ValueError):
            return
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def _fill_protections(self, nproc_fallback: int | None) -> None:
        cfg, report = self.config, self.kernel_report
        p = Protections(mechanism="bwrap" if self._use_bwrap else "rlimits")
        p.filesystem = "workspace_only" if self._use_bwrap else "host"
        interfaces = report.get("network_interfaces")
        p.network = "none" if interfaces is not None and set(interfaces) <= {"lo"} else "host"
        p.pid_namespace = self._use_bwrap
        p.uid = report.get("uid")
        p.no_new_privs = bool(report.get("no_new_privs"))
        p.memory_bytes, p.cpu_s, p.file_bytes = cfg.memory_bytes, cfg.cpu_s, cfg.file_bytes
        p.max_processes = report.get("max_processes") or nproc_fallback
        p.workspace_quota_bytes = cfg.workspace_quota_bytes
        p.user_namespaces_blocked = bool(report.get("user_namespaces_blocked"))
        p.session_log_bytes = cfg.log_bytes
        if not p.user_namespaces_blocked:
            p.notes.append("user namespaces are not blocked (no seccomp filter could be installed)")
        for note in report.get("publish_notes") or []:
            p.notes.append(str(note)[:300])
        if p.uid == 0:
            p.notes.append("the session runs as root (no process limit applies to root)")
        if p.network == "host":
            p.notes.append("no network namespace: the session can reach the network")
        if p.filesystem == "host":
            p.notes.append("no mount namespace: host files readable by the session's uid are visible")
        p.notes.extend(self.protections.notes)
        self.protections = p

    def _copy_session_files(self) -> Path:
        folder = Path(tempfile.mkdtemp(prefix="captain-session-"))
        os.chmod(folder, 0o755)
        for src, dst in iso.SESSION_FILES.items():
            shutil.copyfile(iso.HERE / src, folder / dst)
            os.chmod(folder / dst, 0o644)
        return folder



@dataclass
class WorkspaceUsage:
    """Disk use of a workspace: ``bytes`` (allocated blocks), ``entries`` visited and the
    walk's ``problem`` (too many entries, too deep), if any."""

    bytes: int = 0
    entries: int = 0
    problem: str | None = None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _walk(root: Path, visit: Callable[[int, str, os.stat_result, tuple[str, ...]], bool]) -> WorkspaceUsage:
    """Visit every entry under ``root`` through directory fds only (never a path, never a
    link): ``visit(dir_fd, name, lstat, parents)`` returns False to stop. Bounded by
    ``MAX_WORKSPACE_ENTRIES`` and ``MAX_WORKSPACE_DEPTH``."""
    usage = WorkspaceUsage()
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return usage
    stack: list[tuple[int, Any, tuple[str, ...]]] = []
    try:
        stack.append((top, os.scandir(top), ()))
        while stack:
            fd, entries, parents = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                stack.pop()
                continue
            usage.entries += 1
            if usage.entries > MAX_WORKSPACE_ENTRIES:
                usage.problem = f"has more than {MAX_WORKSPACE_ENTRIES} entries"
                return usage
            try:
                st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            usage.bytes += st.st_blocks * 512
            if not visit(fd, entry.name, st, parents):
                return usage
            if stat.S_ISDIR(st.st_mode):
                if len(parents) + 1 >= MAX_WORKSPACE_DEPTH:
                    usage.problem = f"nests folders deeper than {MAX_WORKSPACE_DEPTH} levels"
                    return usage
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                try:
                    stack.append((child, os.scandir(child), (*parents, entry.name)))
                except OSError:
                    os.close(child)
    finally:
        for fd, entries, _ in stack:
            entries.close()
            with contextlib.suppress(OSError):
                os.close(fd)
    return usage


def workspace_usage(root: Path, stop_at: int | None = None) -> WorkspaceUsage:
    """Bytes the workspace holds (walk stopped early once past ``stop_at``)."""
    total = [0]

    def visit(fd: int, name: str, st: os.stat_result, parents: tuple[str, ...]) -> bool:
        total[0] += st.st_blocks * 512
        return stop_at is None or total[0] <= stop_at

    return _walk(root, visit)


def _unlink_at(root: Path, parents: tuple[str, ...], name: str, is_dir: bool) -> bool:
    """Remove ``parents/name`` under ``root`` through directory fds (``unlinkat``; a folder
    with everything in it). True when removed."""
    fds = []
    try:
        fd = os.open(root, _DIR_FLAGS)
        fds.append(fd)
        for part in parents:
            fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            fds.append(fd)
        if is_dir:
            shutil.rmtree(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
        return True
    except (OSError, RecursionError):
        return False
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def enforce_quota(root: Path, quota: int, uid: int | None) -> list[str]:
    """Remove what the session wrote until the workspace fits 90 % of ``quota``: first the
    folders past the walk's limits, then the largest files (only files of ``uid`` when the
    session has a uid of its own). Returns the workspace-relative names removed."""
    removed: list[str] = []
    for _ in range(8):  # folders past the walk's limits: remove the top-level folder holding them
        usage = _walk(root, lambda *a: True)
        if usage.problem is None:
            break
        tops: list[tuple[int, str]] = []

        def count(fd: int, name: str, st: os.stat_result, parents: tuple[str, ...],
                  tops: list[tuple[int, str]] = tops) -> bool:
            if not parents and stat.S_ISDIR(st.st_mode) and (uid is None or st.st_uid == uid):
                tops.append((0, name))
            if parents and tops and tops[-1][1] == parents[0]:
                tops[-1] = (tops[-1][0] + 1, parents[0])
            return True

        _walk(root, count)
        if not tops:  # too many files at the top: remove the session's files there, newest names last
            top_files: list[str] = []

            def top_level(fd: int, name: str, st: os.stat_result, parents: tuple[str, ...],
                          top_files: list[str] = top_files) -> bool:
                if not parents and not stat.S_ISDIR(st.st_mode) and (uid is None or st.st_uid == uid):
                    top_files.append(name)
                return True

            _walk(root, top_level)
            gone = [n for n in top_files[len(top_files) // 10:] if _unlink_at(root, (), n, False)]
            removed.append(f"{len(gone)} files")
            if not gone:
                break
            continue
        _n, name = max(tops)
        if not _unlink_at(root, (), name, True):
            break
        removed.append(name + "/")
    files: list[tuple[int, tuple[str, ...], str]] = []

    def collect(fd: int, name: str, st: os.stat_result, parents: tuple[str, ...]) -> bool:
        if not stat.S_ISDIR(st.st_mode) and (uid is None or st.st_uid == uid):
            files.append((st.st_blocks * 512, parents, name))
        return True

    total = _walk(root, collect).bytes
    for size, parents, name in sorted(files, reverse=True):
        if not quota or total <= quota * 0.9:
            break
        if _unlink_at(root, parents, name, False):
            total -= size
            removed.append("/".join((*parents, name)))
    return removed


def _failed_reply(name: str, category: str, message: str, note: str = "") -> dict:
    result = {"success": False, "executed": False, "failure_category": category, "message": message,
              "value": None, "diagnostics": {}, "budget": {}}
    receipt = f"{name}: FAILED {category}" + (f"; {note}" if note else "")
    return {"result": result, "receipt": receipt[:300]}


def _timed_out_reply(name: str) -> dict:
    return _failed_reply(name, "timeout", "the cell ran past its time limit; robot calls are refused until the "
                                          "next cell", note="cell time limit reached")
