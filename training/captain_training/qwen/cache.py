"""A small build cache for the offline Qwen3.5 fixtures (tokenizer, processor, tiny model).

Builds land in ``$CAPTAIN_CACHE_DIR`` (default: ``<tmp>/captain-cache``) under a name that
includes a version string, are written to a temporary sibling first and renamed into place,
so concurrent test sessions never see a half-written directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

CACHE_ENV = "CAPTAIN_CACHE_DIR"


def cache_root() -> Path:
    """The cache directory (``$CAPTAIN_CACHE_DIR`` or ``<tmp>/captain-cache``)."""
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path(tempfile.gettempdir()) / "captain-cache"


def cached_build(name: str, build: Callable[[Path], object], *, root: Path | None = None) -> Path:
    """Return ``<root>/<name>``, building it with ``build(tmp_dir)`` first if it is missing.

    A directory counts as built once it holds the marker file ``.complete``.
    """
    root = Path(root) if root is not None else cache_root()
    final = root / name
    if (final / ".complete").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{name}.{uuid.uuid4().hex}.tmp"
    staging.mkdir()
    try:
        build(staging)
        (staging / ".complete").write_text("ok\n")
        try:
            os.replace(staging, final)
        except OSError:
            if not (final / ".complete").is_file():
                shutil.rmtree(final, ignore_errors=True)
                os.replace(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final
