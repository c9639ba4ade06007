"""The policy boundary of a primitive: no exception reaches the policy.

``never_raises`` is shared by the motion primitives (``motion.py``) and the state and
geometry calls (``state_calls.py``); it lives here so that neither module imports the
other for it.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import Callable
from typing import Any

from captain_backends.core.errors import BackendError
from captain_harness.core.errors import HarnessError
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt


def never_raises(name: str) -> Callable:
    """Turn every exception of a primitive into a failed result (the policy boundary)."""

    def wrap(fn: Callable[..., CallOutcome]) -> Callable[..., CallOutcome]:
        @functools.wraps(fn)
        def call(self: Any, *args: Any, **kwargs: Any) -> CallOutcome:
            try:
                return fn(self, *args, **kwargs)
            except HarnessError as exc:
                result = fail(exc.category, str(exc))
            except BackendError as exc:
                result = fail(
                    FailureCategory.DRIVER_FAULT,
                    f"{name}: the driver refused ({exc}); the arm is holding where it is",
                )
            except Exception as exc:
                with contextlib.suppress(Exception):
                    hold = getattr(self, "_safe_hold", None)
                    if hold is not None:
                        hold()
                result = fail(
                    FailureCategory.INTERNAL_ERROR,
                    f"{name} hit an internal error ({type(exc).__name__}: {exc}); the arm is holding",
                    diagnostics={"traceback": traceback.format_exc(limit=8)},
                )
            return CallOutcome(result, format_receipt(name, result))

        return call

    return wrap
