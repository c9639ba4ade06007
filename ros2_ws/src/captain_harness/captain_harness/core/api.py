"""The policy boundary: dispatch robot calls by name, count budgets, never raise.

Primitives are methods declared with ``@primitive`` (``boundary.py``: the primitive
boundary, re-exported here); they validate their own arguments (raising
``HarnessError`` subclasses) and return a ``CallOutcome``. The ``RobotAPI`` binds the
policy's positional and keyword arguments to the primitive's signature, enforces the
physical-action budget, turns every exception of a plain registered callable into a
result dict with a precise ``failure_category`` (``boundary.exception_result``, as the
boundary does for primitives), attaches the ``budget`` entry and records the call in a
log that the host-side completion gate reads.

The same ``RobotAPI`` is used in-process (headless rollouts), behind the ROS 2 action
servers and services, and from the sandboxed session's ``robot`` client.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from captain_harness.core.boundary import (
    NO_HOLD_FAULT,
    PRIMITIVE_ATTR,
    READ_ONLY_FAULT,
    exception_result,
    primitive,
)
from captain_harness.core.budget import Budget
from captain_harness.core.results import (
    CallOutcome,
    FailureCategory,
    fail,
    format_receipt,
)

__all__ = ["CallRecord", "PrimitiveSpec", "RobotAPI", "primitive"]

#: Failure categories that mean the call never reached the robot: not counted as actions.
_NOT_DISPATCHED = {FailureCategory.INVALID_ARGUMENT.value, FailureCategory.BUDGET_EXHAUSTED.value}


@dataclass(frozen=True)
class PrimitiveSpec:
    """A registered primitive: its policy-facing name, the callable, and whether it is a
    physical action (counted against the action budget)."""

    name: str
    fn: Callable[..., CallOutcome]
    physical: bool
    group: str

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The call signature the policy sees (computed once)."""
        return inspect.signature(self.fn)

    @functools.cached_property
    def plain_parameters(self) -> tuple[dict[str, int], frozenset[str], frozenset[str]] | None:
        """(position of each positional-or-keyword parameter, keyword-only names, names
        without a default) when the signature has only such parameters, else None."""
        positions: dict[str, int] = {}
        keyword_only, required = set(), set()
        for p in self.signature.parameters.values():
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
                positions[p.name] = len(positions)
            elif p.kind is inspect.Parameter.KEYWORD_ONLY:
                keyword_only.add(p.name)
            else:
                return None
            if p.default is inspect.Parameter.empty:
                required.add(p.name)
        return positions, frozenset(keyword_only), frozenset(required)

    def fits(self, args: tuple, kwargs: dict[str, Any]) -> bool:
        """True when ``fn(*args, **kwargs)`` binds to the signature (a quick check for plain
        signatures; False also means "not sure": ``signature.bind`` then decides)."""
        plain = self.plain_parameters
        if plain is None:
            return False
        positions, keyword_only, required = plain
        n = len(args)
        if n > len(positions):
            return False
        for name in kwargs:
            if positions.get(name, n) < n or (name not in positions and name not in keyword_only):
                return False
        return all(positions.get(name, n) < n or name in kwargs for name in required)

    @property
    def doc(self) -> str:
        """The primitive's docstring (used to generate TASK.md's API reference)."""
        return inspect.getdoc(self.fn) or ""


@dataclass(frozen=True)
class CallRecord:
    """One dispatched call, as the host-side completion gate and the records see it."""

    index: int
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: dict[str, Any]
    receipt: str
    physical: bool
    counted_as_action: bool
    started_at_s: float
    duration_s: float


@dataclass
class RobotAPI:
    """Dispatcher of policy calls. See the module docstring."""

    budget: Budget = field(default_factory=Budget)
    specs: dict[str, PrimitiveSpec] = field(default_factory=dict)
    log: list[CallRecord] = field(default_factory=list)

    # ------------------------------------------------------------- registration
    def register(self, name: str, fn: Callable[..., CallOutcome], *, physical: bool = False,
                 group: str = "") -> None:
        """Register one callable under a policy-facing name."""
        self.specs[name] = PrimitiveSpec(name=name, fn=fn, physical=physical, group=group)

    def register_object(self, obj: object) -> list[str]:
        """Register every ``@primitive`` method of ``obj``; returns their names."""
        names = []
        for attr in dir(type(obj)):
            fn = getattr(type(obj), attr, None)
            meta = getattr(fn, PRIMITIVE_ATTR, None)
            if meta is None:
                continue
            self.register(meta["name"], getattr(obj, attr), physical=meta["physical"], group=meta["group"])
            names.append(meta["name"])
        return names

    def names(self) -> list[str]:
        """Sorted names of the registered calls."""
        return sorted(self.specs)

    # ------------------------------------------------------------------ calling
    def call(self, name: str, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> CallOutcome:
        """Run one robot call. Never raises; always returns a result dict and a receipt."""
        args = tuple(args)
        kwargs = dict(kwargs or {})
        started = time.monotonic()
        spec = self.specs.get(name)
        counted = False
        if spec is None:
            outcome = self._failed(name, FailureCategory.INVALID_ARGUMENT,
                                   f"robot has no call named {name!r}; available: {', '.join(self.names())}")
        else:
            outcome, counted = self._dispatch(spec, args, kwargs)
        outcome.result["budget"] = self.budget.to_dict()
        self.log.append(CallRecord(
            index=len(self.log), name=name, args=args, kwargs=kwargs, result=outcome.result,
            receipt=outcome.receipt, physical=bool(spec and spec.physical), counted_as_action=counted,
            started_at_s=started, duration_s=time.monotonic() - started,
        ))
        return outcome

    def _dispatch(self, spec: PrimitiveSpec, args: tuple, kwargs: dict) -> tuple[CallOutcome, bool]:
        try:
            if not spec.fits(args, kwargs):
                bound = spec.signature.bind(*args, **kwargs)
                args, kwargs = bound.args, bound.kwargs
        except TypeError as exc:
            params = ", ".join(str(p.replace(annotation=inspect.Parameter.empty))
                               for p in spec.signature.parameters.values())
            return self._failed(spec.name, FailureCategory.INVALID_ARGUMENT,
                                f"{spec.name}(): {exc}; signature is {spec.name}({params})"), False
        if spec.physical and self.budget.physical_actions_left() <= 0:
            return self._failed(spec.name, FailureCategory.BUDGET_EXHAUSTED,
                                f"no physical actions left (limit {self.budget.limits.max_physical_actions});"
                                " call finish() or stop"), False
        try:
            outcome = spec.fn(*args, **kwargs)
            if not isinstance(outcome, CallOutcome):
                raise TypeError(f"primitive {spec.name} returned {type(outcome).__name__}, not CallOutcome")
        except Exception as exc:  # a plain registered callable; primitives answer for themselves
            result = exception_result(spec.name, exc, NO_HOLD_FAULT if spec.physical else READ_ONLY_FAULT)
            outcome = CallOutcome(result, format_receipt(spec.name, result))
        counted = spec.physical and outcome.result.get("failure_category") not in _NOT_DISPATCHED
        if counted:
            self.budget.physical_actions_used += 1
        return outcome, counted

    @staticmethod
    def _failed(name: str, category: FailureCategory, message: str,
                diagnostics: dict[str, Any] | None = None) -> CallOutcome:
        result = fail(category, message, diagnostics=diagnostics)
        return CallOutcome(result, format_receipt(name, result))
