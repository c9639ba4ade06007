"""``TeacherPolicy``: a privileged scripted policy behind the common ``PolicyClient``
interface (``--policy teacher``).

It reads the host-only simulator snapshot that the episode loop hands privileged
policies (``wants_host_context``) and decides from it, but it acts only by writing python
cells against the robot API, as a model would: it observes, clicks pixels it computes by
projecting object positions into the chosen camera, measures, grasps from the measured
geometry with guarded motion, retries after failures, verifies with fresh measurements
and calls ``finish()``. Each reply carries a short reasoning text.

Options (``make_teacher(**options)``, e.g. ``-p seed=3 -p mistake_rate=0.2``):

* ``seed``: makes the episode's choices reproducible (with the episode id); without it
  each episode draws a seed of its own (a fresh style per run), written to ``teacher.json``
  as ``episode_seed``: ``-p seed=<episode_seed>`` runs that episode again call for call;
* ``variety``: randomise the style (speeds, approach sides, verification patterns);
* ``mistake_rate``: probability of one injected, recovered mistake per episode;
* ``mistakes``: which mistakes may be injected (see ``style.MISTAKES``);
* ``failure_rate``: probability of one injected, unrecovered failure per episode (for
  training a critic: the episode ends in a host failure);
* ``failures``: which failures may be injected (see ``style.FAILURES``).

Flags for the records: a reply's ``meta`` (e.g. ``{"injected_mistake": ...,
"nosup_reason": "injected_mistake"}``, ``{"injected_failure": ..., "nosup_reason":
"injected_failure"}`` on the request that makes a failure and ``{"after_injected_failure":
..., "nosup_reason": "injected_failure"}`` on every later one) is attached to the reply object, and the
episode's style and flags are written to ``teacher.json`` in the episode's record folder.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import traceback
from collections import OrderedDict
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from captain_harness.core.episode.history import text_of
from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest, ToolCall, new_call_id
from captain_harness.core.episode.prompt import instruction_of
from captain_harness.core.episode.table_regions import table_regions_in
from captain_teacher.context import Step, TeacherContext
from captain_teacher.feedback import Feedback, last_cells
from captain_teacher.planners.common import PlanError
from captain_teacher.planners.task import plan_episode
from captain_teacher.style import FAILURES, MISTAKES, draw_style, plain_style, with_failure


class TeacherEpisode:
    """One episode's context and its running plan."""

    def __init__(self, ctx: TeacherContext, instruction: str) -> None:
        self.ctx = ctx
        self.plan = plan_episode(ctx, instruction)
        self.started = False
        self.ended = False
        #: the seed this episode's generator was made from (``-p seed=`` reproduces it).
        self.episode_seed: int | None = None

    def next_step(self, fb: Feedback) -> Step | None:
        """The next request's step, or None when the plan is over."""
        self.ctx.update(fb)
        if self.ended:
            return None
        try:
            step = self.plan.send(fb) if self.started else next(self.plan)
        except StopIteration:
            self.ended = True
            return None
        self.started = True
        return step


def _snapshot_of(host_context: Any) -> Any:
    if host_context is None:
        return None
    if hasattr(host_context, "object_poses"):
        return host_context
    if isinstance(host_context, dict) and "snapshot" in host_context:
        return host_context["snapshot"]
    return host_context


class TeacherPolicy(PolicyClient):
    """The teacher (see the module docstring)."""

    name = "teacher"
    wants_host_context = True

    def __init__(self, seed: int | None = None, variety: bool = True, mistake_rate: float = 0.0,
                 mistakes: tuple[str, ...] | list[str] | str = MISTAKES, write_flags: bool = True,
                 failure_rate: float = 0.0, failures: tuple[str, ...] | list[str] | str = FAILURES) -> None:
        mistakes = _choices("mistakes", mistakes, MISTAKES)
        failures = _choices("failures", failures, FAILURES)
        for option, rate in (("mistake_rate", mistake_rate), ("failure_rate", failure_rate)):
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(f"{option} must be in 0..1, got {rate}")
        self.seed = seed
        self.variety = bool(variety)
        self.mistake_rate = float(mistake_rate)
        self.mistakes = tuple(mistakes)
        self.failure_rate = float(failure_rate)
        self.failures = tuple(failures)
        self.write_flags = write_flags
        self._episodes: OrderedDict[str, TeacherEpisode] = OrderedDict()

    def _rng(self, episode_id: str) -> tuple[np.random.Generator, int]:
        """The episode's generator and its seed: from the seed and the task and start of the
        episode id (its random suffix left out), so a seeded run is reproducible; without a
        seed, from a freshly drawn one (returned, so the episode can be run again)."""
        stem = re.sub(r"-[0-9a-f]{6}$", "", episode_id)
        digest = int.from_bytes(hashlib.sha256(stem.encode()).digest()[:8], "little")
        seed = int(self.seed) if self.seed is not None else secrets.randbits(31)
        return np.random.default_rng([seed, digest]), seed

    def _episode(self, request: PolicyRequest) -> TeacherEpisode:
        ep = self._episodes.get(request.episode_id)
        if ep is None or request.request_index == 1:
            rng, episode_seed = self._rng(request.episode_id)
            if self.variety:
                style = draw_style(rng, self.mistake_rate, self.mistakes, self.failure_rate, self.failures)
            else:
                style = plain_style()
                if self.mistake_rate > 0 and rng.random() < self.mistake_rate and self.mistakes:
                    style = replace(style, mistake=str(rng.choice(list(self.mistakes))))
                style = with_failure(style, rng, self.failure_rate, self.failures)
            instruction = instruction_of(request.messages) or "the task in TASK.md"
            ep = TeacherEpisode(TeacherContext(request.episode_id, style, rng), instruction)
            system = next((m for m in request.messages if m.get("role") == "system"), {})
            ep.ctx.table_regions = table_regions_in(text_of(system))  # TASK.md is in the system message
            ep.episode_seed = episode_seed
            self._episodes[request.episode_id] = ep
            while len(self._episodes) > 8:
                self._episodes.popitem(last=False)
        return ep

    def act(self, request: PolicyRequest) -> PolicyReply:
        """One request: the next cells of the episode's plan."""
        t0 = time.perf_counter()
        ep = self._episode(request)
        fb = Feedback(request.request_index, _snapshot_of(request.host_context), last_cells(request.messages),
                      dict(request.budget or {}))
        if fb.snapshot is None:
            return PolicyReply(content="The teacher needs a simulated backend (no simulator snapshot was given).",
                               finish_reason="stop", model="teacher")
        try:
            step = ep.next_step(fb)
        except PlanError as exc:
            ep.ended = True
            step = None
            content = f"I cannot continue: {exc}."
        except Exception as exc:  # a teacher bug ends the episode cleanly, with the reason in the record
            ep.ended = True
            step = None
            content = "I cannot continue with this plan."
            ep.ctx.flags.append({"request_index": request.request_index,
                                 "teacher_error": f"{type(exc).__name__}: {exc}",
                                 "traceback": traceback.format_exc(limit=6)})
        else:
            content = "Done." if step is None else step.content
        if step is None:
            reply = PolicyReply(content=content, finish_reason="stop", model="teacher")
        else:
            calls = [ToolCall(new_call_id(), code) for code in step.cells]
            reply = PolicyReply(content=step.content, reasoning=step.reasoning, tool_calls=calls,
                                finish_reason="tool_calls", model="teacher")
            meta = dict(step.meta)
            if ep.ctx.failure_request is not None and request.request_index > ep.ctx.failure_request:
                meta.update(after_injected_failure=ep.ctx.style.failure, nosup_reason="injected_failure")
            elif meta.get("injected_failure"):
                ep.ctx.failure_request = request.request_index
            step.meta = meta
            reply.meta = dict(step.meta)  # type: ignore[attr-defined]
            if step.meta:
                ep.ctx.flags.append({"request_index": request.request_index, **step.meta})
        self._write_flags(request, ep)
        reply.client_overhead_s = 0.0
        reply.usage = {"teacher_s": round(time.perf_counter() - t0, 4)}
        return reply

    def _write_flags(self, request: PolicyRequest, ep: TeacherEpisode) -> None:
        if not self.write_flags:
            return
        folder = Path(request.image_root) / "episodes" / request.episode_id
        if not folder.is_dir():
            return
        data = {
            "policy": "teacher",
            "seed": self.seed,
            "episode_seed": ep.episode_seed,
            "style": asdict(ep.ctx.style),
            "injected_mistake": ep.ctx.style.mistake if ep.ctx.mistake_done else None,
            "injected_failure": ep.ctx.style.failure if ep.ctx.failure_request is not None else None,
            "flags": ep.ctx.flags,
        }
        tmp = folder / "teacher.json.tmp"
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(folder / "teacher.json")

    def close(self) -> None:
        """Forget running episodes."""
        self._episodes.clear()


def _choices(option: str, values: tuple[str, ...] | list[str] | str, valid: tuple[str, ...]) -> tuple[str, ...]:
    """Names from a tuple or a comma-separated string, each one of ``valid``."""
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    unknown = [v for v in values if v not in valid]
    if unknown:
        raise ValueError(f"unknown {option} {unknown}; choose from {', '.join(valid)}")
    return tuple(values)


def make_teacher(**options: Any) -> TeacherPolicy:
    """Factory for the ``captain.policies`` entry point ``teacher``."""
    return TeacherPolicy(**options)
