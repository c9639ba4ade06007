"""Cell results as the policy sees them (shape fixed by ROBOT_API.md).

A completed cell::

    Cell 7 completed in 5.2 s
    Output:
    <stdout>
    <receipt line of each robot call, at most 20>

A cell that raises reports ``failed`` and its traceback after the output; a cell that
ran past its time limit reports ``timed out``; a restarted session adds a notice. The
whole text is then truncated to a token budget, keeping its beginning and its end.
"""

from __future__ import annotations

from collections.abc import Sequence

from captain_harness.core.episode.tokens import TokenCounter, estimate_tokens

#: Receipt lines printed per cell at most.
MAX_RECEIPT_LINES = 20
#: Default token budget of one cell's output.
DEFAULT_OUTPUT_TOKENS = 4000


def format_duration(duration_s: float) -> str:
    """Cell time as printed in the header: one decimal, seconds."""
    return f"{max(0.0, duration_s):.1f}"


def receipt_lines(receipts: Sequence[str], max_lines: int = MAX_RECEIPT_LINES) -> list[str]:
    """At most ``max_lines`` receipts: the first and last halves with a count of those left out."""
    receipts = [r.replace("\n", " ") for r in receipts]
    if len(receipts) <= max_lines:
        return receipts
    head = max_lines // 2
    tail = max_lines - head
    return [
        *receipts[:head],
        f"[... {len(receipts) - max_lines} more receipts not shown ...]",
        *receipts[-tail:],
    ]


def format_cell_output(
    index: int,
    duration_s: float,
    stdout: str,
    receipts: Sequence[str],
    *,
    error: str | None = None,
    timed_out: bool = False,
    timeout_s: float | None = None,
    restart_reason: str | None = None,
    notes: Sequence[str] = (),
    max_receipt_lines: int = MAX_RECEIPT_LINES,
) -> str:
    """The text of one cell result (before truncation).

    Args:
        index: the cell number k (counted over the episode, from 1).
        duration_s: wall time of the cell.
        stdout: what the cell printed.
        receipts: receipt lines of the cell's robot calls, in call order.
        error: traceback of a failing cell.
        timed_out: the cell was interrupted at its time limit (``timeout_s``).
        restart_reason: the session process was replaced; why.
        notes: further harness messages (e.g. images that were not attached).
    """
    if timed_out:
        limit = f" (limit {timeout_s:g} s)" if timeout_s is not None else ""
        header = f"Cell {index} timed out after {format_duration(duration_s)} s{limit}"
    elif error is not None or (restart_reason is not None and not stdout):
        header = f"Cell {index} failed in {format_duration(duration_s)} s"
    else:
        header = f"Cell {index} completed in {format_duration(duration_s)} s"
    body = stdout.rstrip("\n")
    lines = [header, "Output:"]
    if body:
        lines.append(body)
    lines.extend(receipt_lines(receipts, max_receipt_lines))
    if error:
        lines.append(error.rstrip("\n"))
    lines.extend(notes)
    if timed_out and not restart_reason:
        lines.append("[the cell was interrupted at its time limit; the session keeps its variables]")
    if restart_reason:
        lines.append(
            f"[session restarted: {restart_reason}. Variables and functions defined earlier are lost; "
            "robot, np, math and image() are imported again; the workspace files are kept]"
        )
    return "\n".join(lines)


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: TokenCounter = estimate_tokens) -> str:
    """``text`` cut to at most about ``max_tokens`` tokens: the first 60 % and the last 40 % of
    the allowed length are kept around a marker that says how much was cut."""
    if max_tokens <= 0 or count_tokens(text) <= max_tokens:
        return text
    budget = max(1, max_tokens - 16)  # room for the marker

    def fits(n_chars: int) -> bool:
        head, tail = int(n_chars * 0.6), n_chars - int(n_chars * 0.6)
        return count_tokens(text[:head]) + count_tokens(text[len(text) - tail :] if tail else "") <= budget

    lo, hi = 0, min(len(text), 12 * max_tokens)  # at most 12 characters per token kept
    while lo < hi:  # the longest kept length that fits the budget
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    head, tail = int(lo * 0.6), lo - int(lo * 0.6)
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters truncated ...]\n{text[len(text) - tail :] if tail else ''}"
