"""Episodes on running stacks (ROS-free): the stack list, and the scheduler that keeps one
episode per stack and moves an episode to another stack when its stack fails.

``captain rollout --stacks /robot1,/robot2`` (and ``captain eval run --stacks``) send each
episode to a running bringup's ``run_episode`` action instead of building a robot in
process. The ROS side, one client per stack, is ``captain_harness.nodes.stack_client``;
this module holds what needs no ROS:

* ``parse_stacks``: ``/robot1,/robot2`` or a file with one namespace per line;
* ``run_on_stacks``: one thread per stack takes the next pending episode and runs it
  through ``run_one(stack, job)``. ``run_one`` returns the episode's outcome dict, or raises
  ``StackUnavailable`` when the stack died, stopped answering, or could not run the
  episode: that attempt is recorded as an infrastructure failure (in the final outcome's
  ``stack_attempts``) and the episode goes back to the queue for a stack that has not
  tried it yet. A stack that died (``retire=True``) takes no more episodes. An episode
  that every live stack has tried, or that is left when every stack is gone, ends as an
  ``infrastructure_failure`` outcome with its attempts: no episode is dropped and the
  batch never waits on a dead stack (``run_one`` bounds its own waits).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_NAMESPACE = re.compile(r"^(/[A-Za-z][A-Za-z0-9_]*)+$")


class StackUnavailable(Exception):
    """A stack could not run an episode (it died, stopped answering, refused or aborted it).

    Args:
        message: what happened, with the stack's namespace.
        retire: the stack is gone (dead or not answering): give it no more episodes.
        outcome: the outcome the stack answered, if any (an infrastructure failure it
            reported); it becomes the episode's outcome when no other stack can run it.
    """

    def __init__(self, message: str, *, retire: bool, outcome: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.retire = retire
        self.outcome = outcome


def parse_stacks(text: str) -> list[str]:
    """Namespaces of running stacks: ``/robot1,/robot2`` or the path of a file with one
    namespace per line (``#`` starts a comment). A leading ``/`` is added where missing.

    Raises:
        ValueError: an empty list, an invalid ROS namespace, or a namespace given twice.
    """
    path = Path(text)
    if path.is_file():
        items = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
        where = f"in {path}"
    else:
        items = [part.strip() for part in text.split(",")]
        where = f"in {text!r}"
    stacks: list[str] = []
    for item in items:
        if not item:
            continue
        name = "/" + item.strip("/")
        if not _NAMESPACE.match(name):
            raise ValueError(f"{item!r} {where} is not a ROS namespace (e.g. /robot1: letters, digits and _, "
                             "each part starting with a letter)")
        if name in stacks:
            raise ValueError(f"stack {name} is given twice {where}")
        stacks.append(name)
    if not stacks:
        raise ValueError(f"no stack namespaces {where}; give e.g. --stacks /robot1,/robot2 or a file listing them")
    return stacks


def failed_outcome(job: dict[str, Any], error: str) -> dict[str, Any]:
    """The outcome of an episode no stack could run (the shape ``runner._worker`` gives a
    broken in-process episode)."""
    return {
        "task": job["task"],
        "init_state": job["init_state"],
        "seed": job.get("seed"),
        "outcome": "infrastructure_failure",
        "end_reason": "harness_error",
        "host_success": None,
        "strict_success": False,
        "error": error,
        "requests": 0,
        "physical_actions": 0,
        "wall_time_s": 0.0,
        "harness_s_per_request": [],
    }


@dataclass
class _Pending:
    index: int
    job: dict[str, Any]
    tried: set[str] = field(default_factory=set)
    attempts: list[dict[str, Any]] = field(default_factory=list)


RunOne = Callable[[str, dict[str, Any]], dict[str, Any]]


def run_on_stacks(
    jobs: Sequence[dict[str, Any]],
    stacks: Sequence[str],
    run_one: RunOne,
    *,
    progress: Callable[[str | None, dict[str, Any]], None] | None = None,
    on_attempt_failed: Callable[[str, dict[str, Any], str], None] | None = None,
    on_start: Callable[[str, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every job on the stacks, one at a time per stack (see the module docstring).

    Args:
        jobs: episode jobs (``task``, ``init_state``, optional ``seed``; passed to ``run_one``).
        stacks: the stacks' namespaces.
        run_one: runs one job on one stack and returns its outcome dict, or raises
            ``StackUnavailable``; it must bound its own waits.
        progress: called with (stack or None, outcome) as each episode ends for good.
        on_attempt_failed: called with (stack, job, error) for each failed attempt.
        on_start: called with (stack, job) as a stack takes an episode.

    Returns:
        One outcome per job, in job order; each has ``stack`` (the stack that ran it, None
        if none could) and ``stack_attempts`` (the failed attempts before it: stack, error,
        seconds).
    """
    if not stacks:
        raise ValueError("run_on_stacks needs at least one stack")
    cond = threading.Condition()
    pending = [_Pending(i, dict(job)) for i, job in enumerate(jobs)]
    results: dict[int, dict[str, Any]] = {}
    live = set(stacks)
    running = 0

    def finish(item: _Pending, stack: str | None, outcome: dict[str, Any]) -> None:
        outcome = dict(outcome)
        outcome["stack"] = stack
        outcome["stack_attempts"] = list(item.attempts)
        results[item.index] = outcome
        if progress is not None:
            progress(stack, outcome)

    def settle() -> None:
        """End the pending episodes that no live stack may still try (under ``cond``)."""
        for item in list(pending):
            if live <= item.tried:
                pending.remove(item)
                errors = "; ".join(f"{a['stack']}: {a['error']}" for a in item.attempts)
                last = item.attempts[-1].get("outcome") if item.attempts else None
                outcome = last if last is not None else failed_outcome(
                    item.job, f"no stack could run the episode ({errors or 'every stack is gone'})")
                finish(item, None, outcome)

    def worker(stack: str) -> None:
        nonlocal running
        while True:
            with cond:
                item = None
                while item is None:
                    if stack not in live:
                        return
                    item = next((p for p in pending if stack not in p.tried), None)
                    if item is None:
                        if not pending and running == 0:
                            return
                        cond.wait(0.5)
                pending.remove(item)
                running += 1
            if on_start is not None:
                on_start(stack, item.job)
            started = time.monotonic()
            try:
                outcome = run_one(stack, item.job)
                failure: StackUnavailable | None = None
            except StackUnavailable as exc:
                failure = exc
            except Exception as exc:  # a client bug must not hang the batch: that stack is done
                failure = StackUnavailable(f"{stack}: {type(exc).__name__}: {exc}", retire=True)
            with cond:
                running -= 1
                if failure is None:
                    finish(item, stack, outcome)
                else:
                    item.tried.add(stack)
                    item.attempts.append({"stack": stack, "error": str(failure),
                                          "seconds": round(time.monotonic() - started, 3),
                                          "outcome": failure.outcome})
                    if failure.retire:
                        live.discard(stack)
                    pending.insert(0, item)
                    if on_attempt_failed is not None:
                        on_attempt_failed(stack, item.job, str(failure))
                settle()
                cond.notify_all()

    threads = [threading.Thread(target=worker, args=(s,), name=f"stack{s.replace('/', '_')}", daemon=True)
               for s in stacks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with cond:
        live.clear()
        settle()
    for item in pending:  # unreachable: settle ends every pending episode once no stack is live
        finish(item, None, failed_outcome(item.job, "no stack could run the episode"))
    for attempt_list in (o["stack_attempts"] for o in results.values()):
        for attempt in attempt_list:
            attempt.pop("outcome", None)
    return [results[i] for i in range(len(jobs))]
