"""Episode records: one JSONL of CaPtain-SFT-Data rows per episode, the frames they
reference, and a per-request event log, all written as the episode runs.

Layout under the records root (which plays the role of the dataset root, so the image
paths in the rows are relative to it)::

    images/episodes/<episode>/obs_000_head.png ...   images referenced by the rows
    episodes/<episode>/rows.jsonl                    one row per request
    episodes/<episode>/events.jsonl                  per request: code, cell outputs,
                                                     receipts, timings, token ids
    episodes/<episode>/outcome.json                  the outcome, at the end
    episodes/<episode>/session.log                   the session process's own output (capped)
    episodes/<episode>/published/                    host-only: frames, TASK.md, NOTES.md template
                                                     (read-only to the session, which copies them)
    episodes/<episode>/workspace/                    the session's workspace (session-writable;
                                                     the host never writes or follows anything here)
    episodes/<episode>/episode_bag/                  optional rosbag2 (MCAP) for ros2 bag / Foxglove

A row is the request as the harness sent it plus the model's reply: ``messages`` ends
with the assistant turn of request ``meta.request_index`` (1-based), which is the
supervised turn (``meta.turn_index``, 0-based among the row's assistant turns). Rows and
events are flushed after every request, so a crash loses nothing already done;
``finalize`` fills ``meta.host_final_success`` once the episode's outcome is known.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from captain_harness.core.episode.history import row_images
from captain_harness.core.episode.prompt import PYTHON_TOOL

#: Largest image file accepted from the workspace, bytes.
MAX_IMAGE_BYTES = 16 * 1024**2
#: Largest image side accepted, pixels.
MAX_IMAGE_SIDE_PX = 4096


def read_workspace_file(workspace: Path, relative: str, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """Read a regular file inside ``workspace`` without following any symbolic link and
    without opening anything else: each folder is opened relative to its parent's fd with
    ``O_NOFOLLOW``, the file first with ``O_PATH`` (opening a FIFO or device that way has
    no effect and cannot block), checked to be a regular file with a single link, and only
    then reopened read-only through that fd.

    Raises:
        ValueError: the path leaves the workspace, passes a link, is not a regular file,
            has other hard links or is larger than ``max_bytes``.
    """
    parts = [p for p in PurePosixPath(relative).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or PurePosixPath(relative).is_absolute():
        raise ValueError(f"{relative!r} is not a path inside the workspace")
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open(workspace, flags_dir)
    try:
        for part in parts[:-1]:
            nfd = os.open(part, flags_dir, dir_fd=fd)
            os.close(fd)
            fd = nfd
        pfd = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError as exc:
        raise ValueError(f"{relative!r} cannot be opened in the workspace ({exc.strerror})") from exc
    finally:
        os.close(fd)
    try:
        st = os.fstat(pfd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{relative!r} is not a regular file")
        if st.st_nlink != 1:
            raise ValueError(f"{relative!r} has other hard links")
        if st.st_size > max_bytes:
            raise ValueError(f"{relative!r} is {st.st_size} bytes, more than {max_bytes}")
        try:  # reopen the very inode the O_PATH fd holds (no name is looked up again)
            ffd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise ValueError(f"{relative!r} cannot be read ({exc.strerror})") from exc
    finally:
        os.close(pfd)
    try:
        st2 = os.fstat(ffd)
        if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(st2.st_mode):
            raise ValueError(f"{relative!r} changed while it was opened")
        with os.fdopen(ffd, "rb", closefd=False) as f:
            return f.read(max_bytes + 1)[:max_bytes]
    finally:
        os.close(ffd)


def write_workspace_file(workspace: Path, name: str, data: bytes) -> Path:
    """Write a host file (a frame, TASK.md) into a folder through a fresh temporary file and an
    atomic rename, so whatever has the name is replaced, never written through. Episodes call
    it on the host-only published folder (``EpisodeRecorder.published``), never on the
    session's workspace."""
    import tempfile

    target = Path(workspace) / name
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".host-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


class ImageStore:
    """Copies images from the workspace into the records (validated, never overwritten) and
    returns their row paths (relative to the records root)."""

    def __init__(self, workspace: Path, image_dir: Path, row_prefix: str, published: Path | None = None) -> None:
        self.workspace = Path(workspace)
        self.published = Path(published) if published is not None else None
        self.image_dir = Path(image_dir)
        self.row_prefix = row_prefix.rstrip("/")
        self.image_dir.mkdir(parents=True, exist_ok=True)
        self._by_digest: dict[tuple[str, str], str] = {}

    def attach(self, name: str, published: bool = False) -> tuple[str | None, str | None]:
        """(row path, None) for a valid image file of the workspace (``published``: of the
        host's published folder), else (None, reason)."""
        folder = self.published if published and self.published is not None else self.workspace
        try:
            data = read_workspace_file(folder, name)
        except ValueError as exc:
            return None, f"image {name}: {exc}"
        return self.add_bytes(PurePosixPath(name).name, data)

    def add_bytes(self, name: str, data: bytes) -> tuple[str | None, str | None]:
        """Store image bytes under ``name`` (a new name if a different image has it)."""
        fmt = _image_format(data)
        if fmt is None:
            return None, f"image {name}: not a PNG or JPEG image of at most {MAX_IMAGE_SIDE_PX} px a side"
        digest = hashlib.sha1(data).hexdigest()
        if (name, digest) in self._by_digest:
            return self._by_digest[(name, digest)], None
        stem, suffix = os.path.splitext(name)
        if suffix.lower() not in (".png", ".jpg", ".jpeg"):
            suffix = ".png" if fmt == "PNG" else ".jpg"
        candidate, n = f"{stem}{suffix}", 1
        while (self.image_dir / candidate).exists():
            n += 1
            candidate = f"{stem}_v{n}{suffix}"
        (self.image_dir / candidate).write_bytes(data)
        row_path = f"{self.row_prefix}/{candidate}"
        self._by_digest[(name, digest)] = row_path
        return row_path, None


def _image_format(data: bytes) -> str | None:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format not in ("PNG", "JPEG"):
                return None
            if max(img.size) > MAX_IMAGE_SIDE_PX:
                return None
            return img.format
    except Exception:  # any decoding failure means: not an image
        return None


class EpisodeRecorder:
    """Writes one episode's records. See the module docstring.

    Args:
        root: the records root.
        episode_id: the episode id (also the folder names).
        meta: row ``meta`` fields fixed for the episode (``suite``, ``task_id``, ``seed``,
            ``subset``, ``origin``, ``perturb_axes``).
        tools: the tool schemas of the rows.
        mcap: also write the rosbag2 bag ``episode_bag/`` (see ``mcap_log``).
    """

    def __init__(
        self,
        root: Path,
        episode_id: str,
        meta: dict[str, Any],
        tools: list[dict[str, Any]] | None = None,
        mcap: bool = False,
    ) -> None:
        self.root = Path(root)
        self.episode_id = episode_id
        self.episode_dir = self.root / "episodes" / episode_id
        self.workspace = self.episode_dir / "workspace"
        self.published = self.episode_dir / "published"
        self.rows_path = self.episode_dir / "rows.jsonl"
        self.events_path = self.episode_dir / "events.jsonl"
        self.outcome_path = self.episode_dir / "outcome.json"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.published.mkdir(parents=True, exist_ok=True)
        self.images = ImageStore(
            self.workspace, self.root / "images" / "episodes" / episode_id, f"images/episodes/{episode_id}",
            published=self.published,
        )
        self.tools = tools if tools is not None else [PYTHON_TOOL]
        self.meta = {
            "episode": episode_id,
            "source": "agent",
            "subset": "rollout",
            "origin": "policy",
            "suite": "",
            "task_id": None,
            "seed": None,
            "perturb_axes": [],
            **meta,
        }
        self._rows = self.rows_path.open("a", encoding="utf-8")
        self._events = self.events_path.open("a", encoding="utf-8")
        self._snapshots = None
        self.mcap = None
        if mcap:
            from captain_harness.core.episode.mcap_log import BAG_DIR, McapLog

            self.mcap = McapLog(self.episode_dir / BAG_DIR)

    def row(self, request_index: int, messages: list[dict[str, Any]], total_tokens: int,
            extra_meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """One row: the request's messages ending with the assistant turn of ``request_index``;
        ``extra_meta`` (flags of this request only) is merged into the episode's meta, never
        over the row's own fields."""
        images = row_images(messages)
        turn_index = sum(1 for m in messages if m.get("role") == "assistant") - 1
        meta = {
            **self.meta,
            **(extra_meta or {}),
            "request_index": request_index,
            "turn_index": turn_index,
            "packed_n": 1,
            "total_tokens": int(total_tokens),
            "n_images": len(images),
            "host_final_success": None,
        }
        return {
            "id": f"{self.episode_id}#req-{request_index:03d}",
            "images": images,
            "tools": self.tools,
            "messages": messages,
            "meta": meta,
        }

    def write_row(
        self, request_index: int, messages: list[dict[str, Any]], total_tokens: int,
        extra_meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append one row and flush it (``extra_meta``: see ``row``)."""
        row = self.row(request_index, messages, total_tokens, extra_meta)
        self._rows.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._rows.flush()
        return row

    def write_event(self, event: dict[str, Any]) -> None:
        """Append one event (a request's execution details) and flush it."""
        self._events.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self._events.flush()
        if self.mcap is not None:
            self.mcap.write_event(event, self.root)

    def write_snapshot(self, request_index: int, snapshot: Any) -> None:
        """Append the host-only snapshot taken before request ``request_index`` (1-based; the
        snapshot after the last request has index requests + 1) to ``snapshots.jsonl``."""
        if self._snapshots is None:
            self._snapshots = (self.episode_dir / "snapshots.jsonl").open("a", encoding="utf-8")
        data = snapshot.to_dict() if hasattr(snapshot, "to_dict") else snapshot
        self._snapshots.write(json.dumps({"episode_id": self.episode_id, "request_index": request_index,
                                          "snapshot": data}, default=_json_default) + "\n")
        self._snapshots.flush()

    def finalize(self, outcome: dict[str, Any], host_final_success: bool | None) -> None:
        """Write the outcome and fill ``host_final_success`` in every row (atomic rewrite)."""
        self.close()
        if self.rows_path.exists():
            tmp = self.rows_path.with_suffix(".jsonl.tmp")
            with self.rows_path.open(encoding="utf-8") as src, tmp.open("w", encoding="utf-8") as dst:
                for line in src:
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    row["meta"]["host_final_success"] = host_final_success
                    dst.write(json.dumps(row, ensure_ascii=False) + "\n")
            os.replace(tmp, self.rows_path)
        tmp = self.outcome_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(outcome, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, self.outcome_path)

    def close(self) -> None:
        """Close the open files (idempotent)."""
        for f in (self._rows, self._events, self._snapshots):
            if f is not None and not f.closed:
                f.close()
        if self.mcap is not None:
            self.mcap.close()
            self.mcap = None


def _json_default(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``rows.jsonl``."""
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
