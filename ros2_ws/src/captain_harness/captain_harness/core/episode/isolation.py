"""Operating-system mechanisms of the session sandbox: the bubblewrap command line, the
resource limits applied between fork and exec, the session's own uid, and probes.

bubblewrap layout: a fresh root with ``/usr`` (and its ``/bin``, ``/lib`` links), the
Python runtime, the session's site packages (numpy, scipy, Pillow and their bundled
libraries) and the session's three files mounted read-only; the workspace read-write at
its session path; size-limited tmpfs on ``/tmp`` and ``/dev/shm``; the runtime's own
``site-packages`` hidden; the host's published folder (frames, TASK.md) read-only; new
PID (the session is PID 1), network, IPC and UTS namespaces; killed with its parent.
Everything else on the host is absent.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import util as importlib_util
from pathlib import Path

from captain_harness.core.episode.errors import SessionError

#: Folder of the session's files on the host.
HERE = Path(__file__).resolve().parent
SESSION_FILES = {  # host file -> name inside the session's library folder
    "kernel.py": "_captain_kernel.py",
    "channel.py": "_captain_channel.py",
    "robot_client.py": "robot.py",
}
SESSION_LIB = "/opt/captain/session"  # the session's files inside the sandbox
SESSION_SITE = "/opt/captain/site"  # numpy, scipy, Pillow inside the sandbox
SESSION_PUBLISHED = "/opt/captain/published"  # the host's published files, read-only
_CLONE_NEWNET = 0x40000000
EXIT_CPU_LIMIT = 87  # the kernel's exit status at the CPU-time limit (kernel.EXIT_CPU_LIMIT)
_UID_COUNTER = itertools.count()


@dataclass(frozen=True)
class ResourceLimits:
    """Per-process limits of the session (see ``SandboxConfig``): bytes of address space,
    seconds of CPU time, bytes per written file, open file descriptors."""

    memory_bytes: int
    cpu_s: int
    file_bytes: int
    max_open_files: int


def bwrap_available() -> bool:
    """True when bubblewrap can create the namespaces the sandbox needs here."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        probe = subprocess.run(
            [exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev", "--proc", "/proc",
             "--die-with-parent", "--", "/bin/true"],
            capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


_BWRAP_OK: bool | None = None


def bwrap_ok() -> bool:
    """``bwrap_available()``, probed once per process."""
    global _BWRAP_OK
    if _BWRAP_OK is None:
        _BWRAP_OK = bwrap_available()
    return _BWRAP_OK


def module_dirs(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """(host folder, name) of each importable top-level package and its bundled ``*.libs``."""
    out: list[tuple[str, str]] = []
    for name in names:
        spec = importlib_util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations))).resolve()
        out.append((str(folder), name))
        dist = {"PIL": "pillow"}.get(name, name).lower()
        for libs in folder.parent.glob("*.libs"):
            if libs.name.lower() == f"{dist}.libs" and (str(libs), libs.name) not in out:
                out.append((str(libs), libs.name))
    return out


def world_traversable(path: Path) -> bool:
    """True when every folder above ``path`` can be entered by any user."""
    for parent in [path, *path.parents]:
        try:
            if not (parent.stat().st_mode & stat.S_IXOTH):
                return False
        except OSError:
            return False
    return True


def session_uid() -> int:
    """An unprivileged uid of this session that no running process uses (so the process limit
    counts, and stray-process cleanup reaches, only this session's processes)."""
    for _ in range(64):
        uid = 200_000 + (os.getpid() * 64 + next(_UID_COUNTER)) % 700_000
        if count_user_processes(uid) == 0:
            return uid
    raise SessionError("no free unprivileged uid found for the session; set drop_uid=False")


def count_user_processes(uid: int) -> int:
    """Number of running processes owned by ``uid``."""
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def bwrap_argv(python: str, prefix: str, site_dirs: list[tuple[str, str]], info_fd: int, *, workspace: Path,
               session_workspace: str, tmp_bytes: int, switch_uid: bool, published: Path | None = None) -> list[str]:
    """The bubblewrap command line (without the program to run) of a session: see the module docstring.

    ``published`` (the host's published folder) is mounted read-only at ``SESSION_PUBLISHED``.
    bubblewrap's ``--disable-userns`` needs ``--unshare-user``, which would map the session's
    uid to the host's root outside the sandbox; user namespaces are refused by the kernel's
    seccomp filter instead.
    """
    argv = [
        "bwrap",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--info-fd",
        str(info_fd),
    ]
    made: set[str] = set()

    def dirs_for(dest: str) -> list[str]:
        out: list[str] = []
        parents = list(Path(dest).parents)[::-1][1:]  # skip "/"
        for parent in parents:
            if str(parent) not in made and not str(parent).startswith("/usr"):
                made.add(str(parent))
                out += ["--perms", "0755", "--dir", str(parent)]
        return out

    argv += ["--ro-bind", "/usr", "/usr"]
    for link, target in (
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ):
        if os.path.islink(link):
            argv += ["--symlink", target, link]
        elif os.path.isdir(link):
            argv += ["--ro-bind", link, link]
    for etc in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(etc):
            argv += [*dirs_for(etc), "--ro-bind", etc, etc]
    if not prefix.startswith("/usr/"):
        argv += [*dirs_for(prefix), "--ro-bind", prefix, prefix]
        site_packages = (
            Path(prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        )
        if site_packages.is_dir():
            argv += ["--size", "65536", "--tmpfs", str(site_packages)]
    if not python.startswith(prefix) and not python.startswith("/usr/"):
        argv += [*dirs_for(python), "--ro-bind", python, python]
    argv += [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--size",
        str(tmp_bytes),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        "--size",
        str(tmp_bytes),
        "--perms",
        "1777",
        "--tmpfs",
        "/dev/shm",
    ]
    for host_dir, name in site_dirs:
        dest = f"{SESSION_SITE}/{name}"
        argv += [*dirs_for(dest), "--ro-bind", host_dir, dest]
    for src, dst in SESSION_FILES.items():
        dest = f"{SESSION_LIB}/{dst}"
        argv += [*dirs_for(dest), "--ro-bind", str(HERE / src), dest]
    if published is not None:
        argv += [*dirs_for(SESSION_PUBLISHED), "--ro-bind", str(published), SESSION_PUBLISHED]
    ws = session_workspace
    argv += [*dirs_for(ws), "--bind", str(workspace), ws, "--chdir", ws]
    if switch_uid:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return argv


def read_child_pid(fd: int, timeout_s: float) -> int | None:
    """The host pid of the sandboxed process, from bubblewrap's ``--info-fd`` JSON."""
    import select

    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return int(json.loads(data.decode())["child-pid"])
            except (ValueError, KeyError):
                continue
    finally:
        os.close(fd)
    return None


def limits_preexec(limits: ResourceLimits, nproc: int | None, unshare_net: bool) -> Callable[[], None]:
    """The child's set-up between fork and exec: resource limits (and, without bubblewrap,
    a network namespace when the kernel allows it)."""

    def preexec() -> None:
        rlimits = [
            (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
            (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 5),  # SIGXCPU first, SIGKILL 5 s later
            (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
            (resource.RLIMIT_NOFILE, limits.max_open_files, limits.max_open_files),
            (resource.RLIMIT_CORE, 0, 0),
        ]
        if nproc is not None:
            rlimits.append((resource.RLIMIT_NPROC, nproc, nproc))
        for which, soft, hard in rlimits:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (soft, hard))
        if unshare_net:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                libc.unshare(_CLONE_NEWNET)
            except OSError:
                pass

    return preexec
