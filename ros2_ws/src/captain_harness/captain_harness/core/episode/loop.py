"""The ReAct loop over requests.

One request is one model call. The reply's python tool calls run in order in the
sandboxed session; their results (cell output, receipts, images) are appended to the
history as tool messages, and the next request goes out. The loop ends when

* ``finish()`` was accepted (after the request's cells),
* a reply has no tool call,
* a budget is exhausted when the next request would start (requests, physical
  actions or wall time; the wall time also bounds every cell and every robot call),
* a robot call runs past its host-side wall-clock limit (``robot_call_timeout``, an
  infrastructure failure; the episode's record and outcome are still written),
* the policy cannot be reached (an infrastructure failure),
* the ``before_request`` hook asks to stop (RL: the critic cut or the missed-finish
  stop); the hook receives the host-only snapshot taken before the request, which never
  reaches the policy's session.

Each request is recorded as a row (the request's messages plus the reply) and an event
(code, outputs, receipts, timings, token ids). Flags a policy attaches to its reply as
``reply.meta`` (e.g. ``injected_mistake``, ``nosup_reason``) go into the row's ``meta``
and the event's ``meta``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from captain_harness.core.budget import Budget
from captain_harness.core.episode.cells import DEFAULT_OUTPUT_TOKENS, format_cell_output, truncate_to_tokens
from captain_harness.core.episode.channel import clean, clean_text
from captain_harness.core.episode.errors import PolicyError, PolicyUnavailableError, RobotCallTimeoutError
from captain_harness.core.episode.history import History, Turn, defined_names
from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest, ToolCall
from captain_harness.core.episode.records import EpisodeRecorder
from captain_harness.core.episode.router import CallRouter
from captain_harness.core.episode.sandbox import CellRun, SandboxSession


@dataclass
class LoopConfig:
    """Settings of the loop.

    Attributes:
        cell_timeout_s: time limit of one cell, s (also capped by the wall time left).
        max_output_tokens: token budget of one cell's output.
        max_calls_per_cell: robot calls one cell may make.
        call_timeout_s: host-side wall-clock limit of one robot call, s (also capped by the
            wall time left); a call past it ends the episode (``robot_call_timeout``).
        end_on_finish: end the episode as soon as ``finish()`` is accepted (remaining
            tool calls of that reply are not run).
        record_snapshots: write the backend's host-only snapshot taken before every
            request (and after the last) to ``snapshots.jsonl``, for the RL critic.
    """

    cell_timeout_s: float = 120.0
    max_output_tokens: int = DEFAULT_OUTPUT_TOKENS
    max_calls_per_cell: int = 500
    call_timeout_s: float = 180.0
    end_on_finish: bool = True
    record_snapshots: bool = False


@dataclass
class LoopResult:
    """How the loop ended: ``end_reason`` (``finished``, ``no_tool_call``,
    ``budget_requests``, ``budget_physical_actions``, ``budget_wall_time``,
    ``policy_unavailable``, ``policy_error``, ``robot_call_timeout``), the requests made, and
    per-request timings."""

    end_reason: str
    requests: int
    error: str | None = None
    stopped_by_hook: bool = False
    policy_s: list[float] = field(default_factory=list)
    harness_s: list[float] = field(default_factory=list)
    robot_s: list[float] = field(default_factory=list)


#: Called after every request with its event dict (for streaming to a console).
EventCallback = Callable[[dict[str, Any]], None]
#: Called before every request with (request_index, host snapshot or None); a returned
#: string ends the episode with that end reason before the request is made.
BeforeRequestHook = Callable[[int, Any], "str | None"]

_NOT_TAKEN = object()


def request_record(cells: list[dict[str, Any]], finished_before: bool, finished_after: bool) -> dict[str, Any]:
    """What one request did, for RL credit (counts over the request's cells).

    * ``physical_actions``: physical robot calls attempted (rejected and failed ones included);
    * ``failed_actions``: of those, the ones that did not succeed;
    * ``python_error_only``: the reply had cells, every one ended in a Python error (or was
      a malformed tool call) and no robot call was made;
    * ``accepted_finish``: ``finish()`` was accepted during this request.
    """
    calls = [c for cell in cells for c in cell.get("calls") or []]
    physical = [c for c in calls if c.get("physical")]
    errored = bool(cells) and all(cell.get("error") for cell in cells)
    return {
        "physical_actions": len(physical),
        "failed_actions": sum(1 for c in physical if not c.get("success")),
        "python_error_only": errored and not calls,
        "accepted_finish": finished_after and not finished_before,
    }


def sanitize_reply(reply: PolicyReply) -> PolicyReply:
    """The reply with every text a policy produced passed through ``channel.clean_text``
    (lone surrogates replaced): the one boundary where policy text enters the harness."""
    reply.content = clean_text(reply.content) if isinstance(reply.content, str) else str(reply.content or "")
    reply.reasoning = clean_text(reply.reasoning) if isinstance(reply.reasoning, str) else str(reply.reasoning or "")
    for call in reply.tool_calls:
        call.id = clean_text(str(call.id))
        call.code = clean_text(call.code) if isinstance(call.code, str) else str(call.code)
        if call.error is not None:
            call.error = clean_text(str(call.error))
    if isinstance(reply.meta if hasattr(reply, "meta") else None, dict):
        reply.meta = clean(reply.meta)  # type: ignore[attr-defined]
    if reply.model is not None:
        reply.model = clean_text(str(reply.model))
    if reply.finish_reason is not None:
        reply.finish_reason = clean_text(str(reply.finish_reason))
    return reply


def reply_meta(reply: PolicyReply) -> dict[str, Any]:
    """The flags a policy attached to its reply as ``reply.meta`` (e.g. ``injected_mistake``,
    ``nosup_reason``), for the request's row; keys that are not strings are dropped and
    values that JSON cannot hold are written as text."""
    meta = getattr(reply, "meta", None)
    if not isinstance(meta, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str):
            continue
        out[key] = value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else str(value)
    return out


class EpisodeLoop:
    """Runs the requests of one episode. See the module docstring."""

    def __init__(
        self,
        *,
        episode_id: str,
        session: SandboxSession,
        router: CallRouter,
        history: History,
        policy: PolicyClient,
        recorder: EpisodeRecorder,
        budget: Budget,
        config: LoopConfig | None = None,
        host_context: Callable[[], Any] | None = None,
        on_event: EventCallback | None = None,
        before_request: BeforeRequestHook | None = None,
    ) -> None:
        self.episode_id = episode_id
        self.session = session
        self.router = router
        self.history = history
        self.policy = policy
        self.recorder = recorder
        self.budget = budget
        self.config = config or LoopConfig()
        self.host_context = host_context
        self.on_event = on_event
        self.before_request = before_request
        self.cell_index = 0
        self.started_s = time.monotonic()
        #: The robot call that ran past its limit (the episode ended), if any.
        self.hung_call: RobotCallTimeoutError | None = None
        #: The result so far (complete once ``run`` returns; partial if it raised).
        self.result = LoopResult(end_reason="", requests=0)

    def run(self) -> LoopResult:
        """Run requests until the episode ends."""
        result = self.result
        while True:
            exhausted = self.budget.exhausted()
            if exhausted:
                result.end_reason = f"budget_{exhausted}"
                return result
            context: Any = _NOT_TAKEN
            if self.before_request is not None:
                index = self.budget.requests_used + 1
                context = self._take_context(index)
                stop = self.before_request(index, context)
                if stop:
                    result.end_reason = str(stop)
                    result.stopped_by_hook = True
                    return result
            end = self._request(result, context)
            if end:
                result.end_reason = end
                return result

    # ---------------------------------------------------------------- request
    def _take_context(self, index: int) -> Any:
        """The host-only snapshot before request ``index`` (written when recording snapshots)."""
        if self.host_context is None:
            return None
        context = self.host_context()
        if self.config.record_snapshots:
            self.recorder.write_snapshot(index, context)
        return context

    def _request(self, result: LoopResult, context: Any = _NOT_TAKEN) -> str | None:
        t0 = time.perf_counter()
        self.budget.requests_used += 1
        index = self.budget.requests_used
        result.requests = index
        messages = self.history.render()
        estimated = self.history.estimate_tokens()
        request = PolicyRequest(
            episode_id=self.episode_id,
            request_index=index,
            messages=messages,
            tools=self.recorder.tools,
            image_root=self.recorder.root,
            budget=self.budget.to_dict(),
        )
        if context is _NOT_TAKEN and self.host_context is not None and (
                self.policy.wants_host_context or self.config.record_snapshots):
            context = self._take_context(index)
        if self.policy.wants_host_context and context is not _NOT_TAKEN:
            request.host_context = context
        t_policy = time.perf_counter()
        try:
            reply = self.policy.act(request)
        except PolicyUnavailableError as exc:
            result.error = str(exc)
            return "policy_unavailable"
        except PolicyError as exc:
            result.error = str(exc)
            return "policy_error"
        reply = sanitize_reply(reply)
        policy_s = max(0.0, time.perf_counter() - t_policy - reply.client_overhead_s)
        self.history.calibrate(estimated, reply.usage.get("prompt_tokens"))
        assistant = reply.assistant_message()
        total_tokens = int(reply.usage.get("prompt_tokens") or estimated) + int(
            reply.usage.get("completion_tokens") or 0
        )
        self.recorder.write_row(index, [*messages, assistant], total_tokens, reply_meta(reply))

        robot_before = self.router.robot_s
        finished_before = self.router.finished
        turn = Turn(request_index=index, assistant=assistant)
        cells: list[dict[str, Any]] = []
        code_s = 0.0
        end: str | None = None
        for call in reply.tool_calls:
            if self.router.finished and self.config.end_on_finish:
                break  # finish() was accepted in an earlier cell of this reply
            cell = self._run_call(call, turn)
            cells.append(cell)
            code_s += cell.get("code_s", 0.0)
            if self.hung_call is not None:
                break
        if self.hung_call is not None:
            end = "budget_wall_time" if self.hung_call.cause == "wall_time" else "robot_call_timeout"
            result.error = None if end == "budget_wall_time" else str(self.hung_call)
        elif not reply.tool_calls:
            end = "no_tool_call"
        elif self.router.finished and self.config.end_on_finish:
            end = "finished"
        self.history.add(turn)
        robot_s = self.router.robot_s - robot_before
        total_s = time.perf_counter() - t0
        harness_s = max(0.0, total_s - policy_s - robot_s - code_s)
        result.policy_s.append(policy_s)
        result.robot_s.append(robot_s)
        result.harness_s.append(harness_s)
        event = self._event(index, reply, cells, policy_s, robot_s, code_s, harness_s, estimated)
        event["request_record"] = request_record(cells, finished_before, self.router.finished)
        if reply_meta(reply):
            event["meta"] = reply_meta(reply)
        self.recorder.write_event(event)
        if self.on_event is not None:
            self.on_event(event)
        return end

    # ------------------------------------------------------------------- cells
    def _tool_message(self, call: ToolCall, text: str, images: list[str]) -> dict[str, Any]:
        return {
            "role": "tool",
            "tool_call_id": call.id,
            "content": [{"type": "text", "text": text}, *({"type": "image", "image": p} for p in images)],
        }

    def _run_call(self, call: ToolCall, turn: Turn) -> dict[str, Any]:
        if call.error is not None:
            turn.tools.append(self._tool_message(call, call.error, []))
            return {
                "index": None,
                "tool_call_id": call.id,
                "code": call.code,
                "output": call.error,
                "receipts": [],
                "calls": [],
                "images": [],
                "error": call.error,
            }
        wall_left = self.budget.wall_time_left_s()
        if wall_left <= 0:
            text = "Not run: the episode's wall-time budget is exhausted."
            turn.tools.append(self._tool_message(call, text, []))
            return {
                "index": None,
                "tool_call_id": call.id,
                "code": call.code,
                "output": text,
                "receipts": [],
                "calls": [],
                "images": [],
            }
        self.cell_index += 1
        timeout_s = min(self.config.cell_timeout_s, wall_left)
        self.router.begin_cell()
        self.router.max_calls_per_cell = self.config.max_calls_per_cell
        try:
            run = self.session.run_cell(self.cell_index, call.code, timeout_s, self.router,
                                        call_timeout_s=self.config.call_timeout_s,
                                        episode_deadline=time.monotonic() + wall_left)
        except RobotCallTimeoutError as exc:
            self.hung_call = exc
            run = CellRun(error=None, timed_out=True, duration_s=exc.limit_s,
                          notes=[f"[{exc}]"])
        calls = list(self.router.cell_calls)
        receipts = [c.receipt for c in calls]
        notes = list(run.notes)
        images: list[str] = []
        for name in run.images:
            path, problem = self.recorder.images.attach(name)
            if path is not None:
                images.append(path)
            else:
                notes.append(f"image(): {problem}; not attached")
        text = format_cell_output(
            self.cell_index,
            run.duration_s,
            run.stdout,
            receipts,
            error=run.error,
            timed_out=run.timed_out,
            timeout_s=timeout_s,
            restart_reason=run.restart_reason,
            notes=notes,
        )
        text = truncate_to_tokens(text, self.config.max_output_tokens, self.history.config.count_tokens)
        turn.tools.append(self._tool_message(call, text, images))
        turn.commands.extend(c.short() for c in calls)
        if run.error and not calls:
            turn.commands.append("cell failed: " + run.error.strip().splitlines()[-1][:80])
        turn.defined.extend(n for n in defined_names(call.code) if n not in turn.defined)
        return {
            "index": self.cell_index,
            "tool_call_id": call.id,
            "code": call.code,
            "output": text,
            "receipts": receipts,
            "images": images,
            "duration_s": round(run.duration_s, 4),
            "code_s": run.code_s,
            "error": run.error,
            "timed_out": run.timed_out,
            "restart_reason": run.restart_reason,
            "quota_exceeded": run.quota_exceeded,
            "ignored_messages": run.ignored_messages,
            "calls": [
                {
                    "name": c.name,
                    "success": c.success,
                    "failure_category": c.failure_category,
                    "executed": c.executed,
                    "physical": c.physical,
                    "receipt": c.receipt,
                    "duration_s": round(c.duration_s, 4),
                    "log_index": c.log_index,
                }
                for c in calls
            ],
        }

    def _event(
        self,
        index: int,
        reply: PolicyReply,
        cells: list[dict[str, Any]],
        policy_s: float,
        robot_s: float,
        code_s: float,
        harness_s: float,
        estimated: int,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "request_index": index,
            "t_s": round(time.monotonic() - self.started_s, 3),
            "policy_s": round(policy_s, 4),
            "robot_s": round(robot_s, 4),
            "code_s": round(code_s, 4),
            "harness_s": round(harness_s, 4),
            "estimated_prompt_tokens": estimated,
            "usage": reply.usage,
            "finish_reason": reply.finish_reason,
            "model": reply.model,
            "reasoning": reply.reasoning,
            "content": reply.content,
            "cells": cells,
            "budget": self.budget.to_dict(),
            "compacted_requests": len(self.history.compacted),
            "finished": self.router.finished,
        }
        if reply.prompt_token_ids is not None:
            event["prompt_token_ids"] = reply.prompt_token_ids
        if reply.completion_token_ids is not None:
            event["completion_token_ids"] = reply.completion_token_ids
        if reply.logprobs is not None:
            event["logprobs"] = reply.logprobs
        return event
