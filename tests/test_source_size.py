"""No project source file (tests aside) is longer than 600 lines: big modules are split by concept."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = [ROOT / "ros2_ws" / "src", ROOT / "training", ROOT / "teacher", ROOT / "examples", ROOT / "scripts",
                ROOT / "launch"]
LIMIT = 600


def _is_test(path: Path) -> bool:
    return any(part in {"test", "tests"} for part in path.parts) or path.name.startswith(("test_", "conftest"))


def test_no_source_file_is_over_600_lines() -> None:
    sizes = {}
    for root in SOURCE_ROOTS:
        for path in root.rglob("*.py"):
            if _is_test(path.relative_to(ROOT)) or "build" in path.relative_to(ROOT).parts[:3]:
                continue
            sizes[path.relative_to(ROOT)] = len(path.read_text(encoding="utf-8").splitlines())
    assert len(sizes) > 100, "the scan found too few source files"
    over = sorted(f"{p}: {n} lines" for p, n in sizes.items() if n > LIMIT)
    assert not over, f"source files over {LIMIT} lines (split them by concept):\n" + "\n".join(over)
