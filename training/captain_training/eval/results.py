"""Per-episode evaluation results and their JSONL files.

One JSON object per line with at least::

    {"suite": "libero_goal", "task_id": "libero_goal/3", "init_state": 11,
     "host_success": true, "strict_success": false}

Other keys (requests, false_finish, wall_time_s, ...) are kept in ``extra``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_training.eval.errors import ResultFileError

REQUIRED_KEYS = ("suite", "task_id", "init_state", "host_success", "strict_success")
METRICS = ("host_success", "strict_success")


@dataclass(frozen=True)
class EpisodeResult:
    """The outcome of one evaluation episode.

    ``init_state`` is the official initial-state index, or any string naming a generated
    start state; it is compared as text, so 11 and "11" are the same state.
    """

    suite: str
    task_id: str
    init_state: str
    host_success: bool
    strict_success: bool
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """The pairing key (suite, task, initial state)."""
        return (self.suite, self.task_id, self.init_state)

    @property
    def cluster(self) -> tuple[str, str]:
        """The bootstrap cluster (suite, task)."""
        return (self.suite, self.task_id)

    def metric(self, name: str) -> bool:
        if name not in METRICS:
            raise ResultFileError(f"unknown metric {name!r}; valid: {list(METRICS)}")
        return bool(getattr(self, name))

    @classmethod
    def from_dict(cls, row: dict[str, Any], where: str = "") -> EpisodeResult:
        missing = [k for k in REQUIRED_KEYS if k not in row]
        if missing:
            raise ResultFileError(f"{where}missing keys {missing}; every result needs {list(REQUIRED_KEYS)}")
        for k in METRICS:
            if not isinstance(row[k], bool | int) or row[k] not in (0, 1):
                raise ResultFileError(f"{where}{k!r} must be true/false, got {row[k]!r}")
        if bool(row["strict_success"]) and not bool(row["host_success"]):
            raise ResultFileError(f"{where}strict_success without host_success is impossible "
                                  "(strict success = host success and finish())")
        extra = {k: v for k, v in row.items() if k not in REQUIRED_KEYS}
        return cls(str(row["suite"]), str(row["task_id"]), str(row["init_state"]), bool(row["host_success"]),
                   bool(row["strict_success"]), extra)

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "task_id": self.task_id, "init_state": self.init_state,
                "host_success": self.host_success, "strict_success": self.strict_success, **self.extra}


def read_results(path: str | Path) -> list[EpisodeResult]:
    """Load a result JSONL file; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise ResultFileError(f"no result file at {path}")
    out = []
    for line_no, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultFileError(f"{path}:{line_no}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise ResultFileError(f"{path}:{line_no}: each line must be a JSON object")
        out.append(EpisodeResult.from_dict(row, where=f"{path}:{line_no}: "))
    if not out:
        raise ResultFileError(f"{path} holds no results")
    return out


def write_results(results: Iterable[EpisodeResult], path: str | Path) -> None:
    """Write results as JSONL."""
    with Path(path).open("w") as fh:
        for r in results:
            fh.write(json.dumps(r.to_dict()) + "\n")
