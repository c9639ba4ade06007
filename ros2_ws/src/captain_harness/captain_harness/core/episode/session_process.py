"""The sandboxed session's process (host side): starting it (under bubblewrap or with
resource limits only), its log, the protections it runs with, the workspace-quota
watcher, and ending it. ``sandbox.SandboxSession`` runs cells in it; the invariant the
host keeps towards the session is in ``sandbox``'s docstring.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Self

from captain_harness.core.episode import isolation as iso
from captain_harness.core.episode.channel import Channel, ChannelClosedError, ProtocolViolationError
from captain_harness.core.episode.errors import SessionError
from captain_harness.core.episode.session_types import CellRun, Protections, SandboxConfig
from captain_harness.core.episode.workspace_quota import (
    MAX_WORKSPACE_DEPTH,
    MAX_WORKSPACE_ENTRIES,
    enforce_quota,
    workspace_usage,
)

_log = logging.getLogger("captain_harness.core.episode.sandbox")


class SessionProcess:
    """The session's process and its resources; ``SandboxSession`` (``sandbox``) adds the
    cells. Arguments as ``SandboxSession``'s."""

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

    def __enter__(self) -> Self:
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
