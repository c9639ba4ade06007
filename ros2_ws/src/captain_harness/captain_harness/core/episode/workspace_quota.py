"""The workspace quota: the disk use of a session's workspace and the removal of what
the session wrote past its quota.

Part of the host's invariant (``sandbox``'s docstring): the walk uses only directory fds
(``O_NOFOLLOW``) and ``lstat``-like calls, is bounded in depth and entries, and removes
files with ``unlinkat`` relative to its directory fds; it never follows a link the
session planted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The quota walk visits at most this many entries and this many folder levels; a
#: workspace past either counts as over quota.
MAX_WORKSPACE_ENTRIES = 100_000
MAX_WORKSPACE_DEPTH = 64


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
