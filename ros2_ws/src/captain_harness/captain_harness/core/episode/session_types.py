"""The sandboxed session's configuration (``SandboxConfig``), the protections a running
session has (``Protections``) and what one cell did (``CellRun``); see ``sandbox``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
