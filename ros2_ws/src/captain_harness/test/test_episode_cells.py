"""Cell results keep the fixed shape; receipts and long outputs are bounded."""

from __future__ import annotations

from captain_harness.core.episode.cells import format_cell_output, receipt_lines, truncate_to_tokens
from captain_harness.core.episode.tokens import estimate_tokens


def test_completed_cell_has_the_fixed_shape() -> None:
    text = format_cell_output(7, 5.23, "hello\n", ["move_to: ok; stopped_reason=target_reached", "hold: ok"])
    assert (
        text
        == "Cell 7 completed in 5.2 s\nOutput:\nhello\nmove_to: ok; stopped_reason=target_reached\nhold: ok"
    )
    assert format_cell_output(1, 0.0, "", []) == "Cell 1 completed in 0.0 s\nOutput:"


def test_failing_timed_out_and_restarted_cells_say_so() -> None:
    tb = ('Traceback (most recent call last):\n  File "<cell 3>", line 1, in <module>\n'
          "ZeroDivisionError: division by zero")
    text = format_cell_output(3, 0.04, "partial\n", ["observe: ok"], error=tb)
    assert text.startswith("Cell 3 failed in 0.0 s\nOutput:\npartial\nobserve: ok\nTraceback")
    text = format_cell_output(4, 30.0, "", [], error="KeyboardInterrupt", timed_out=True, timeout_s=30)
    assert text.startswith("Cell 4 timed out after 30.0 s (limit 30 s)") and "keeps its variables" in text
    text = format_cell_output(5, 1.0, "", [], restart_reason="the session process was ended by SIGKILL")
    assert "[session restarted: the session process was ended by SIGKILL." in text and "lost" in text


def test_at_most_twenty_receipt_lines() -> None:
    receipts = [f"hold: ok; n={i}" for i in range(35)]
    lines = receipt_lines(receipts)
    assert len([x for x in lines if x.startswith("hold:")]) == 20
    assert lines[0].endswith("n=0") and lines[-1].endswith("n=34") and "15 more receipts" in lines[10]
    text = format_cell_output(1, 1.0, "", receipts)
    assert text.count("hold: ok") == 20


def test_truncation_keeps_head_and_tail_within_the_budget() -> None:
    text = "Cell 1 completed in 1.0 s\nOutput:\n" + "word " * 20000 + "\nmove_to: ok; final receipt"
    cut = truncate_to_tokens(text, 500)
    assert estimate_tokens(cut) <= 500
    assert cut.startswith("Cell 1 completed") and cut.endswith("final receipt")
    assert "characters truncated" in cut
    assert truncate_to_tokens("short", 500) == "short"


def test_token_estimate_counts_digits_one_by_one() -> None:
    assert estimate_tokens("0.1681") == 5 + 1
    assert estimate_tokens("abcdefg") == 2
    assert estimate_tokens("") == 0
