"""Streaming reader for CaPtain-SFT-Data row files (one JSON object per line).

Rows are read one line at a time from a binary file handle, so memory holds one row, never
the file (the released ``sft.jsonl`` is 2.33 GB). Every row remembers its 1-based line
number and byte offset; a byte offset is enough to read that row again later (this is how
the trainer reads its shard and resumes).

A malformed row raises :class:`RowFormatError` naming the line and every problem of the row.
:func:`validate_file` instead collects the problems of the whole file and reports them at once.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from captain_training.sft.errors import RowFormatError
from captain_training.sft.rows import assistant_message_indices, image_refs, normalize_row, row_problems


@dataclass(frozen=True)
class RowRecord:
    """One row of a data file.

    Attributes:
        line_number: 1-based line of the row in its file.
        byte_offset: offset of the first byte of the line in its file.
        row: the parsed row (tool-call arguments decoded to objects).
    """

    line_number: int
    byte_offset: int
    row: dict[str, Any]

    @property
    def row_id(self) -> str:
        """The row's ``id`` (or ``line-<n>`` when it has none)."""
        return str(self.row.get("id") or f"line-{self.line_number}")


def parse_line(raw: bytes, line_number: int, *, validate: bool = True, source: str = "") -> dict[str, Any]:
    """Parse (and by default check) one line; raise :class:`RowFormatError` if it is malformed."""
    if not raw.strip():
        raise RowFormatError(line_number, ["blank line; every line must hold one JSON object"], source)
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise RowFormatError(line_number, [f"not valid JSON ({detail})"], source) from None
    if validate:
        problems = row_problems(row)
        if problems:
            raise RowFormatError(line_number, problems, source)
    return normalize_row(row)


def iter_rows(
    path: Path | str,
    *,
    validate: bool = True,
    start_offset: int = 0,
    start_line: int = 1,
    limit: int | None = None,
) -> Iterator[RowRecord]:
    """Yield the rows of ``path`` one at a time.

    Args:
        path: JSONL file of rows.
        validate: check every row's structure (raise :class:`RowFormatError` on the first bad row).
        start_offset: byte offset to start reading at (the start of a line).
        start_line: line number of the line at ``start_offset``.
        limit: stop after this many rows.
    """
    source = str(path)
    with open(path, "rb") as handle:
        handle.seek(start_offset)
        offset = start_offset
        for produced, raw in enumerate(handle):
            if limit is not None and produced >= limit:
                return
            line_number = start_line + produced
            row = parse_line(raw, line_number, validate=validate, source=source)
            yield RowRecord(line_number, offset, row)
            offset += len(raw)


def read_row_at(handle: IO[bytes], byte_offset: int, line_number: int, *, validate: bool = True,
                source: str = "") -> RowRecord:
    """Read the row starting at ``byte_offset`` of an open binary file."""
    handle.seek(byte_offset)
    raw = handle.readline()
    if not raw:
        raise RowFormatError(line_number, [f"no row at byte offset {byte_offset} (end of file)"], source)
    return RowRecord(line_number, byte_offset, parse_line(raw, line_number, validate=validate, source=source))


def line_offsets(path: Path | str) -> list[int]:
    """Byte offset of every line of ``path`` (one streaming pass)."""
    offsets = []
    offset = 0
    with open(path, "rb") as handle:
        for raw in handle:
            offsets.append(offset)
            offset += len(raw)
    return offsets


@dataclass(frozen=True)
class Problem:
    """One problem of a data file: the 1-based line and what is wrong there."""

    line_number: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line_number}: {self.message}"


@dataclass
class ValidationReport:
    """The result of :func:`validate_file`.

    Attributes:
        path: the file checked.
        n_rows: lines read.
        n_bytes: bytes read.
        problems: every problem found (up to ``max_problems``), in file order.
        n_bad_rows: rows with at least one problem.
        counts: row counts by ``source``, ``subset`` and supervision kind.
        n_assistant_turns, n_images: totals over well-formed rows.
        elapsed_s: wall time of the check.
    """

    path: str
    n_rows: int = 0
    n_bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    n_bad_rows: int = 0
    truncated: bool = False
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    n_assistant_turns: int = 0
    n_images: int = 0
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return self.n_bad_rows == 0

    @property
    def rows_per_s(self) -> float:
        """Throughput of the check in rows per second."""
        return self.n_rows / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary."""
        return {
            "path": self.path,
            "ok": self.ok,
            "n_rows": self.n_rows,
            "n_bad_rows": self.n_bad_rows,
            "n_bytes": self.n_bytes,
            "n_assistant_turns": self.n_assistant_turns,
            "n_images": self.n_images,
            "counts": self.counts,
            "problems": [{"line": p.line_number, "message": p.message} for p in self.problems],
            "problems_truncated": self.truncated,
            "elapsed_s": round(self.elapsed_s, 3),
            "rows_per_s": round(self.rows_per_s, 1),
        }


def _supervision_kind(meta: dict[str, Any]) -> str:
    if meta.get("nosup_reason") is not None:
        return "unsupervised"
    if meta.get("supervise_turns") is not None:
        return "prefix_packed"
    if meta.get("turn_index") is not None:
        return "per_request"
    return "all_turns"


def validate_file(
    path: Path | str,
    *,
    image_root: Path | str | None = None,
    max_problems: int | None = 1000,
    progress: Callable[[int, int], None] | None = None,
) -> ValidationReport:
    """Check every row of ``path`` and report all problems at once.

    Args:
        path: JSONL file of rows.
        image_root: directory the image paths are relative to; when given, every referenced
            image must exist there.
        max_problems: keep at most this many problem messages (all bad rows are still counted).
        progress: called as ``progress(rows_read, bytes_read)`` every 1,000 rows.
    """
    report = ValidationReport(path=str(path))
    counters: dict[str, Counter[str]] = {"source": Counter(), "subset": Counter(), "supervision": Counter()}
    root = Path(image_root) if image_root is not None else None
    checked_images: set[str] = set()
    start = time.perf_counter()

    def add(line_number: int, message: str) -> None:
        if max_problems is None or len(report.problems) < max_problems:
            report.problems.append(Problem(line_number, message))
        else:
            report.truncated = True

    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            report.n_rows += 1
            report.n_bytes += len(raw)
            try:
                row = parse_line(raw, line_number, validate=True)
            except RowFormatError as exc:
                report.n_bad_rows += 1
                for problem in exc.problems:
                    add(line_number, problem)
                continue
            bad = False
            if root is not None:
                for ref in image_refs(row["messages"]):
                    if ref in checked_images:
                        continue
                    if not os.path.isfile(root / ref):
                        add(line_number, f"image {ref!r} not found under image root {root}")
                        bad = True
                    else:
                        checked_images.add(ref)
            if bad:
                report.n_bad_rows += 1
                continue
            meta = row["meta"]
            counters["source"][str(meta.get("source"))] += 1
            counters["subset"][str(meta.get("subset", "-"))] += 1
            counters["supervision"][_supervision_kind(meta)] += 1
            report.n_assistant_turns += len(assistant_message_indices(row["messages"]))
            report.n_images += len(image_refs(row["messages"]))
            if progress is not None and report.n_rows % 1000 == 0:
                progress(report.n_rows, report.n_bytes)
    report.counts = {name: dict(sorted(counter.items())) for name, counter in counters.items()}
    report.elapsed_s = time.perf_counter() - start
    return report
