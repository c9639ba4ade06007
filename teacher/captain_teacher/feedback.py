"""What the teacher reads back after each request: the cell outputs of its own last
reply (as the session printed them, receipts included) and the host-only snapshot.

The teacher's cells print a few lines in a fixed form, ``<key>: <python literal>``
(e.g. ``cameras: {...}``), so that the values it needs host side (camera intrinsics and
poses, the tool position in the base frame, its own measurements) can be read back
exactly. Everything else it decides from the snapshot.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

_LINE_RE = re.compile(r"^([a-z_][a-z0-9_]*): (.+)$")
_CELL_HEADER_RE = re.compile(r"^Cell (\d+) (completed|failed|timed out)")


@dataclass
class CellOutput:
    """One tool result: its text, whether the cell failed, and the values it printed."""

    text: str
    failed: bool
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def receipts(self) -> list[str]:
        """Receipt lines (``name: ok; ...`` / ``name: FAILED ...``)."""
        return [line for line in self.text.splitlines()
                if re.match(r"^[a-z_]+: (ok|FAILED)\b", line)]


@dataclass
class Feedback:
    """Everything the teacher gets at the start of a request.

    Attributes:
        request_index: 1-based index of the coming request.
        snapshot: the host-only simulator snapshot (None when the backend has none).
        cells: outputs of the previous reply's cells, in order.
        budget: the episode budget counters.
    """

    request_index: int
    snapshot: Any
    cells: list[CellOutput] = field(default_factory=list)
    budget: dict[str, Any] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, Any]:
        """Printed values of all cells of the previous reply (later cells win)."""
        out: dict[str, Any] = {}
        for cell in self.cells:
            out.update(cell.values)
        return out

    @property
    def failed(self) -> bool:
        """Whether any cell of the previous reply failed (raised or timed out)."""
        return any(c.failed for c in self.cells)

    @property
    def text(self) -> str:
        """All cell outputs of the previous reply, joined."""
        return "\n".join(c.text for c in self.cells)

    def receipt_failed(self, name: str) -> bool:
        """Whether a receipt of ``name`` in the previous reply reports a failure."""
        return any(r.startswith(f"{name}: FAILED") for c in self.cells for r in c.receipts)


def parse_values(text: str) -> dict[str, Any]:
    """``key: literal`` lines of a cell's printed output, parsed; others are skipped."""
    values: dict[str, Any] = {}
    for line in text.splitlines():
        m = _LINE_RE.match(line.strip())
        if not m:
            continue
        try:
            values[m.group(1)] = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return values


def _tool_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def last_cells(messages: list[dict[str, Any]]) -> list[CellOutput]:
    """The tool results that answer the last assistant message of a rendered history."""
    tail: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "tool":
            tail.append(message)
    cells = []
    for message in reversed(tail):
        text = _tool_text(message)
        header = _CELL_HEADER_RE.match(text)
        failed = header is None or header.group(2) != "completed" or "Traceback (most recent call last)" in text
        cells.append(CellOutput(text=text, failed=failed, values=parse_values(text)))
    return cells
