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
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from captain_harness.core.episode import isolation as iso
from captain_harness.core.episode.channel import Channel, ChannelClosedError, ProtocolViolationError
from captain_harness.core.episode.errors import SessionError

#: Signature of the host's handler of one robot call: (name, args, kwargs) -> message
#: with ``result`` (the result dict) and ``receipt``.
CallHandler = Callable[[str, list, dict], dict]


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


class SandboxSession:
    """The persistent, sandboxed Python session of one episode. See the module docstring.

    Args:
        workspace: the episode's workspace folder on the host (created if missing).
        specs: the robot calls the session's ``robot`` module defines: dicts with ``name``,
            ``signature`` (text) and ``doc``.
        config: limits and isolation.
    """

    def __init__(self, workspace: Path, specs: list[dict[str, Any]],
                 config: SandboxConfig | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
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
        self._uid: int | None = None
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

    def start(self) -> Protections:
        """Start the session process; returns the protections in force."""
        self._choose_uid()
        self._spawn()
        return self.protections

    def alive(self) -> bool:
        """True while the session process runs."""
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """Stop the session process and free its resources."""
        if self._channel is not None:
            with contextlib.suppress(ChannelClosedError, ProtocolViolationError):
                self._channel.send({"op": "shutdown"})
        self._kill(wait_s=1.0)
        if self._lib_dir is not None:
            shutil.rmtree(self._lib_dir, ignore_errors=True)
            self._lib_dir = None
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
    def run_cell(self, index: int, code: str, timeout_s: float, on_call: CallHandler) -> CellRun:
        """Run one cell. Robot calls are answered by ``on_call`` while the cell runs.

        Never raises for anything the cell does: a timeout interrupts the cell, a hang past
        the grace period or a dead session process restarts the session, and the returned
        ``CellRun`` says what happened.
        """
        run = CellRun()
        started = time.monotonic()
        if not self.alive():
            self.restart("the session process was not running")
            run.restarted, run.restart_reason = True, "the session process was not running"
        assert self._channel is not None
        deadline = started + max(0.0, timeout_s)
        hard_deadline: float | None = None
        next_quota_check = started + 1.0
        try:
            self._channel.send({"op": "exec", "cell": index, "code": code})
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
                    over = self._workspace_over_quota()
                    if over is not None:
                        self._crash(run, f"the workspace holds more than {over} (quota); large files were removed",
                                    cleanup=True)
                        break
                wait = (hard_deadline if hard_deadline is not None else deadline) - now
                message = self._channel.recv(timeout_s=max(0.0, min(wait, 0.5)))
                if message is None:
                    if not self.alive():
                        raise ChannelClosedError("the session process ended")
                    continue
                op = message.get("op")
                if op == "call":
                    run.calls += 1
                    if run.timed_out:
                        reply = _timed_out_reply(str(message.get("name", "")))
                    else:
                        reply = self._handle_call(message, on_call)
                    reply.update(op="result", id=message.get("id"))
                    self._channel.send(reply)
                elif op == "done" and message.get("cell") == index:
                    run.stdout = str(message.get("stdout") or "")
                    run.error = message.get("error")
                    run.images = [str(x) for x in message.get("images") or []]
                    run.notes = [str(x) for x in message.get("notes") or []]
                    run.code_s = float(message.get("code_s") or 0.0)
                    break
                else:
                    raise ProtocolViolationError(f"unexpected message {op!r} from the session")
        except (ChannelClosedError, ProtocolViolationError, OSError) as exc:
            self._crash(run, self._exit_reason(exc))
        if not run.restarted:
            over = self._workspace_over_quota()
            if over is not None:
                removed = self._enforce_quota()
                run.notes.append(
                    f"[the workspace passed its {over} quota; removed the largest files the session "
                    f"wrote: {', '.join(removed[:8])}]"
                )
        run.duration_s = time.monotonic() - started
        return run

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _handle_call(message: dict, on_call: CallHandler) -> dict:
        name = message.get("name")
        args = message.get("args")
        kwargs = message.get("kwargs")
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(kwargs, dict):
            return _failed_reply("robot", "invalid_argument", "malformed robot call")
        try:
            return on_call(name, args, kwargs)
        except Exception as exc:  # the session only ever gets a result dict
            return _failed_reply(name, "internal_error", f"the harness failed on this call ({type(exc).__name__}: "
                                                         f"{exc}); try again or use another call")

    def _crash(self, run: CellRun, reason: str, cleanup: bool = False) -> None:
        self._kill(wait_s=0.5)
        if cleanup:
            self._enforce_quota()
        run.restarted = True
        run.restart_reason = reason
        try:
            self.restart(reason)
        except SessionError as exc:
            run.restart_reason = f"{reason}; the session could not be restarted ({exc})"

    def _exit_reason(self, exc: BaseException) -> str:
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
    def _workspace_bytes(self, stop_at: int | None = None) -> int:
        total = 0
        stack = [str(self.workspace)]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        total += st.st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        if stop_at is not None and total > stop_at:
                            return total
            except OSError:
                continue
        return total

    def _workspace_over_quota(self) -> str | None:
        quota = self.config.workspace_quota_bytes
        if quota and self._workspace_bytes(stop_at=quota) > quota:
            return f"{quota / 1024**2:.0f} MiB"
        return None

    def _enforce_quota(self) -> list[str]:
        """Delete the largest files the session wrote until the workspace fits its quota;
        returns their workspace-relative names."""
        quota = self.config.workspace_quota_bytes
        files: list[tuple[int, str]] = []
        for root, _dirs, names in os.walk(self.workspace):
            for name in names:
                path = os.path.join(root, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if self._uid is not None and st.st_uid != self._uid:
                    continue  # files written by the host (TASK.md, frames) stay
                files.append((st.st_blocks * 512, path))
        total = self._workspace_bytes()
        removed: list[str] = []
        for size, path in sorted(files, reverse=True):
            if total <= quota * 0.9:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size
                removed.append(os.path.relpath(path, self.workspace))
        return removed

    # ------------------------------------------------------------------- spawning
    def _choose_uid(self) -> None:
        drop = self.config.drop_uid
        can = os.geteuid() == 0
        if not self._use_bwrap:
            can = can and iso.world_traversable(Path(sys.base_prefix)) and iso.world_traversable(self.workspace)
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
        if self._use_bwrap:
            info_r, info_w = os.pipe()
            pass_fds.append(info_w)
            kernel_config["site"] = [iso.SESSION_SITE]
            kernel_config["workspace"] = self.session_workspace
            argv = iso.bwrap_argv(python, prefix, site_dirs, info_w, workspace=self.workspace,
                                  session_workspace=self.session_workspace, tmp_bytes=cfg.tmp_bytes,
                                  switch_uid=self._uid is not None)
            argv += ["--", python, "-I", f"{iso.SESSION_LIB}/_captain_kernel.py"]
        else:
            self._lib_dir = self._lib_dir or self._copy_session_files()
            kernel_config["site"] = sorted({str(Path(d).parent) for d, _ in site_dirs})
            kernel_config["workspace"] = str(self.workspace)
            argv = [python, "-I", str(self._lib_dir / "_captain_kernel.py")]
        argv.append(json.dumps(kernel_config))
        if self._log is None:
            self._log = open(cfg.log_path, "ab") if cfg.log_path else open(os.devnull, "wb")  # noqa: SIM115
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
                stdout=self._log,
                stderr=self._log,
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
        self._channel = Channel(parent_sock)
        self._pid = self._proc.pid
        if info_r is not None:
            self._pid = iso.read_child_pid(info_r, cfg.startup_timeout_s) or self._proc.pid
        try:
            self._channel.send({"op": "init", "specs": self.specs})
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



def _failed_reply(name: str, category: str, message: str, note: str = "") -> dict:
    result = {"success": False, "executed": False, "failure_category": category, "message": message,
              "value": None, "diagnostics": {}, "budget": {}}
    receipt = f"{name}: FAILED {category}" + (f"; {note}" if note else "")
    return {"result": result, "receipt": receipt[:300]}


def _timed_out_reply(name: str) -> dict:
    return _failed_reply(name, "timeout", "the cell ran past its time limit; robot calls are refused until the "
                                          "next cell", note="cell time limit reached")
