"""Atomic files: a reader sees either the old file or the complete new one, never a torn write.

Each writer writes to a temporary file in the destination folder, flushes and fsyncs it,
then renames it over the destination (``os.replace`` is atomic on POSIX within one file
system) and fsyncs the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def _atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write bytes atomically; returns the path."""
    return _atomic_write(path, lambda fh: fh.write(data))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write a JSON document atomically (sorted keys, indented)."""
    return atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def atomic_torch_save(path: str | Path, obj: Any) -> Path:
    """``torch.save`` atomically."""
    import torch

    return _atomic_write(path, lambda fh: torch.save(obj, fh))
