"""The host side of the session's robot calls.

Every ``robot.<name>(...)`` message from the session is answered here: paths are
translated between the session's view of the workspace and the host's, the call runs
through the ``RobotAPI`` (``finish`` included, which the completion gate answers), and
the receipt is kept for the cell output. Calls past a per-cell limit and physical calls
after an accepted ``finish()`` are refused with a result dict, never an exception.

Arguments are checked against the channel's bounds before any primitive sees them
(``arguments.check_call_payload``: nesting, integer size, encoded size). Tracebacks a
primitive put into ``diagnostics`` go to the host log only, never to the session. Files
the call wrote into the host-only published folder (frames) are listed in the answer as
``publish``; the session copies them into its workspace itself.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_harness.core.api import RobotAPI
from captain_harness.core.arguments import check_call_payload
from captain_harness.core.errors import ArgumentError
from captain_harness.core.results import FailureCategory, format_receipt, make_result

_log = logging.getLogger(__name__)


@dataclass
class CallSummary:
    """One robot call of a cell, for the event log and the compaction notice."""

    name: str
    success: bool
    failure_category: str | None
    executed: bool
    physical: bool
    receipt: str
    duration_s: float
    log_index: int | None = None

    def short(self) -> str:
        """``move_to ok`` / ``move_to FAILED contact``."""
        return f"{self.name} ok" if self.success else f"{self.name} FAILED {self.failure_category}"


@dataclass
class CallRouter:
    """Answers the session's robot calls. See the module docstring.

    Attributes:
        api: the robot API (with ``finish`` registered).
        host_workspace / session_workspace: the workspace on the host and in the session.
        max_calls_per_cell: robot calls one cell may make.
        published: the host-only folder the primitives write frames into (None: none);
            paths under it are shown to the session as paths in its workspace.
    """

    api: RobotAPI
    host_workspace: Path
    session_workspace: str
    max_calls_per_cell: int = 500
    published: Path | None = None
    finished: bool = False
    cell_calls: list[CallSummary] = field(default_factory=list)
    robot_s: float = 0.0
    _seen: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._scan_published()  # what is there before the first call (initial frames, TASK.md)

    def _scan_published(self) -> list[str]:
        """Names of published regular files that are new or changed since the last scan
        (made readable to the session's uid)."""
        if self.published is None:
            return []
        changed = []
        try:
            with os.scandir(self.published) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    sig = (st.st_ino, st.st_size, st.st_mtime_ns)
                    if self._seen.get(entry.name) != sig:
                        self._seen[entry.name] = sig
                        if st.st_mode & 0o044 != 0o044:
                            os.chmod(entry.path, 0o644)  # host-only folder: readable by the session's uid
                        changed.append(entry.name)
        except OSError:
            return []
        return sorted(changed)

    def begin_cell(self) -> None:
        """Reset the per-cell call list."""
        self.cell_calls = []

    def _translate(self, value: Any, src: str, dst: str) -> Any:
        if src == dst:
            return value
        if isinstance(value, str):
            return dst + value[len(src):] if value.startswith(src) else value
        if isinstance(value, list):
            return [self._translate(v, src, dst) for v in value]
        if isinstance(value, dict):
            return {k: self._translate(v, src, dst) for k, v in value.items()}
        return value

    def _translate_out(self, value: Any) -> Any:
        value = self._translate(value, str(self.host_workspace), self.session_workspace)
        if self.published is not None:
            value = self._translate(value, str(self.published), self.session_workspace)
        return value

    def _refuse(self, name: str, category: str, message: str) -> dict[str, Any]:
        result = make_result(success=False, failure_category=category, message=message,
                             budget=self.api.budget.to_dict())
        receipt = format_receipt(name, result)
        self.cell_calls.append(CallSummary(name, False, category, False, False, receipt, 0.0))
        return {"result": result, "receipt": receipt}

    def __call__(self, name: str, args: list, kwargs: dict) -> dict[str, Any]:
        if len(self.cell_calls) >= self.max_calls_per_cell:
            return self._refuse(
                name,
                FailureCategory.BUDGET_EXHAUSTED.value,
                f"more than {self.max_calls_per_cell} robot calls in one cell; end the cell and "
                "continue in the next one",
            )
        spec = self.api.specs.get(name)
        if self.finished and spec is not None and spec.physical:
            return self._refuse(
                name,
                FailureCategory.CANCELLED.value,
                "finish() was accepted; the episode has ended and nothing moves any more",
            )
        try:
            check_call_payload(args, kwargs)
        except ArgumentError as exc:
            return self._refuse(name, FailureCategory.INVALID_ARGUMENT.value, f"{name}(): {exc}")
        host, session = str(self.host_workspace), self.session_workspace
        args = self._translate(args, session, host)
        kwargs = self._translate(kwargs, session, host)
        started = time.perf_counter()
        outcome = self.api.call(name, args, kwargs)
        duration = time.perf_counter() - started
        self.robot_s += duration
        diagnostics = outcome.result.get("diagnostics")
        if isinstance(diagnostics, dict) and "traceback" in diagnostics:
            _log.error("robot call %s failed on the host:\n%s", name, diagnostics["traceback"])
            outcome.result["diagnostics"] = {k: v for k, v in diagnostics.items() if k != "traceback"}
        result = self._translate_out(outcome.result)
        receipt = self._translate_out(outcome.receipt)
        if (
            name == "finish"
            and result.get("success")
            and isinstance(result.get("value"), dict)
            and result["value"].get("accepted")
        ):
            self.finished = True
        record = self.api.log[-1] if self.api.log else None
        self.cell_calls.append(
            CallSummary(
                name=name,
                success=bool(result.get("success")),
                failure_category=result.get("failure_category"),
                executed=bool(result.get("executed")),
                physical=bool(spec and spec.physical),
                receipt=receipt,
                duration_s=duration,
                log_index=record.index if record is not None else None,
            )
        )
        answer: dict[str, Any] = {"result": result, "receipt": receipt}
        published = self._scan_published()
        if published:
            answer["publish"] = published
        return answer
