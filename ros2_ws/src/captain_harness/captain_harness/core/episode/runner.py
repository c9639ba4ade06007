"""Run one episode (``run_episode``) or many in parallel processes (``rollout``).

``run_episode`` builds the backend with a factory, registers ``finish`` (the completion
gate), writes TASK.md and NOTES.md into the workspace, takes the initial head and wrist
frames, starts the sandboxed session, runs the ReAct loop, evaluates host success and
writes the records. It never raises for anything the policy or its code does; an
unreachable policy server ends the episode as an infrastructure failure, and so does a
robot call that runs past its host-side limit (``LoopConfig.call_timeout_s``).

Frames and ``TASK.md`` go to the episode's host-only published folder (the backend's
``BackendRequest.workspace``), records next to it; the session's workspace is written
only by the session (see ``sandbox.py``).

``rollout`` runs a list of (task, initial state) episodes in ``workers`` processes and
summarises them (host %, strict %, false finish %, requests, actions, wall time, harness
time per request, episodes per hour per core).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from captain_harness.core.budget import Budget, BudgetLimits
from captain_harness.core.episode.backend import (
    LIBERO_SUITE_SIZES,
    Backend,
    BackendFactory,
    BackendRequest,
    factory_reference,
    resolve_factory,
    split_task,
)
from captain_harness.core.episode.gate import CompletionGate, GateConfig, standards_for
from captain_harness.core.episode.history import History, HistoryConfig
from captain_harness.core.episode.loop import BeforeRequestHook, EpisodeLoop, EventCallback, LoopConfig
from captain_harness.core.episode.outcome import EpisodeOutcome, classify
from captain_harness.core.episode.policy.base import PolicyClient
from captain_harness.core.episode.policy.registry import PolicySpec, make_policy
from captain_harness.core.episode.prompt import (
    PYTHON_TOOL,
    SYSTEM_PROMPT,
    environment_context_text,
    system_message_text,
    task_request_text,
)
from captain_harness.core.episode.records import EpisodeRecorder, write_workspace_file
from captain_harness.core.episode.router import CallRouter
from captain_harness.core.episode.sandbox import SandboxConfig, SandboxSession
from captain_harness.core.episode.taskmd import TaskMdContext, client_signature_text, render_task_md

#: Where the workspace appears inside the session (the path published rows use).
SESSION_EPISODES_ROOT = "/data/captain/episodes"
NOTES_MD = "# NOTES\n\nYour notes for this episode (kept across context compaction).\n"


@dataclass
class EpisodeConfig:
    """Every setting of an episode (paper defaults).

    Attributes:
        limits: requests, physical actions, wall time.
        loop: cell timeout, output budget, calls per cell.
        history: image window and compaction.
        gate: rejections and tolerances.
        sandbox: isolation and resource limits.
        subset / origin: ``meta.subset`` and ``meta.origin`` of the rows.
        mcap: also write an MCAP file per episode.
        date: the date in the environment context (None: today).
        system_prompt: the harness prompt before TASK.md (None: ``prompt.SYSTEM_PROMPT``);
            see ``prompt.load_system_prompt`` to take it from a released model's SFT row.
    """

    limits: BudgetLimits = field(default_factory=BudgetLimits)
    loop: LoopConfig = field(default_factory=LoopConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    subset: str = "rollout"
    origin: str | None = None
    mcap: bool = False
    date: str | None = None
    system_prompt: str | None = None


def make_episode_id(task: str, init_state: int, seed: int | None) -> str:
    """``libero_spatial_0_seed-11-1a2b3c``: suite, task, start, and a random suffix."""
    suite, name = split_task(task)
    start = init_state if init_state >= 0 else (seed if seed is not None else 0)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{suite}_{name}")
    return f"{safe}_seed-{start}-{uuid.uuid4().hex[:6]}"


def client_specs(backend: Backend) -> list[dict[str, Any]]:
    """The robot calls the session's ``robot`` module defines (name, signature, docstring)."""
    return [{"name": s.name, "signature": client_signature_text(s), "doc": s.doc}
            for s in backend.api.specs.values()]


def _initial_images(backend: Backend, recorder: EpisodeRecorder) -> list[str]:
    """Row paths of the initial head and wrist frames."""
    names: list[str] = []
    if backend.initial_images is not None:
        names = list(backend.initial_images())
    elif "observe" in backend.api.specs:
        outcome = backend.api.call("observe")
        names = _image_names(outcome.result.get("value"), recorder.published)
    elif backend.driver is not None and hasattr(backend.driver, "capture"):
        names = capture_frames(backend.driver, recorder.published)
    paths = []
    for name in names[:4]:
        path, _problem = recorder.images.attach(name, published=True)
        if path is not None:
            paths.append(path)
    return paths


def _image_names(value: Any, workspace: Path, depth: int = 0) -> list[str]:
    """Workspace-relative image file names found in an ``observe()`` value."""
    if depth > 5 or value is None:
        return []
    if isinstance(value, str):
        if value.lower().endswith((".png", ".jpg", ".jpeg")):
            p = Path(value)
            if p.is_absolute():
                try:
                    return [str(p.resolve().relative_to(workspace.resolve()))]
                except ValueError:
                    return []
            return [value]
        return []
    if isinstance(value, dict):
        source = value.get("images", value) if depth == 0 else value
        items = source.values() if isinstance(source, dict) else source
        return [n for v in (items if isinstance(items, (list, tuple)) else list(items))
                for n in _image_names(v, workspace, depth + 1)]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _image_names(v, workspace, depth + 1)]
    return []


def capture_frames(driver: Any, workspace: Path) -> list[str]:
    """Capture the head and wrist cameras into ``obs_000_head.png`` / ``obs_000_wrist.png`` in
    ``workspace`` (an episode passes its host-only published folder)."""
    import io

    from PIL import Image

    frames = driver.capture()
    names = []
    for camera, label in (("agentview", "head"), ("robot0_eye_in_hand", "wrist")):
        frame = frames.get(camera)
        if frame is None:
            continue
        buf = io.BytesIO()
        Image.fromarray(frame.rgb).save(buf, format="PNG")
        name = f"obs_000_{label}.png"
        write_workspace_file(workspace, name, buf.getvalue())
        names.append(name)
    return names


def run_episode(
    task: str,
    *,
    policy: PolicyClient | PolicySpec | str,
    out_dir: str | Path,
    backend_factory: BackendFactory | str | None = None,
    init_state: int = -1,
    seed: int | None = None,
    config: EpisodeConfig | None = None,
    episode_id: str | None = None,
    on_event: EventCallback | None = None,
    before_request: BeforeRequestHook | None = None,
    driver_options: dict[str, Any] | None = None,
) -> EpisodeOutcome:
    """Run one episode and write its records under ``out_dir``. See the module docstring.

    Args:
        task: ``"<suite>/<task>"``.
        policy: a policy client, or a spec/name built with ``make_policy``.
        out_dir: the records root.
        backend_factory: builds the backend (callable or ``"module:function"``; None: the
            default backend of the registered drivers).
        init_state: official initial-state index (-1: the backend's default).
        seed: layout seed.
        config: episode settings.
        episode_id: the episode id (default: generated).
        on_event: called after every request with its event.
        before_request: called before every request with (request index, host-only
            snapshot); a returned string ends the episode with that end reason (RL early
            stops). The snapshot stays on the host.
        driver_options: options for the driver's typed config (``BackendRequest.driver_options``).
    """
    cfg = config or EpisodeConfig()
    out = Path(out_dir)
    suite, name = split_task(task)
    episode_id = episode_id or make_episode_id(task, init_state, seed)
    own_policy = not isinstance(policy, PolicyClient)
    client = make_policy(policy) if own_policy else policy
    assert isinstance(client, PolicyClient)
    origin = cfg.origin or getattr(getattr(client, "config", None), "model", None) or client.name
    recorder = EpisodeRecorder(
        out,
        episode_id,
        meta={
            "suite": suite,
            "task_id": int(name) if name.isdigit() else name,
            "seed": init_state if init_state >= 0 else seed,
            "subset": cfg.subset,
            "origin": str(origin),
        },
        tools=[PYTHON_TOOL],
        mcap=cfg.mcap,
    )
    sandbox_cfg = replace(
        cfg.sandbox,
        session_workspace=cfg.sandbox.session_workspace or f"{SESSION_EPISODES_ROOT}/{episode_id}/workspace",
        log_path=cfg.sandbox.log_path or recorder.episode_dir / "session.log",
    )
    started = time.monotonic()
    backend: Backend | None = None
    session: SandboxSession | None = None
    gate: CompletionGate | None = None
    router: CallRouter | None = None
    loop: EpisodeLoop | None = None
    loop_result = None
    error: str | None = None
    host_success: bool | None = None
    perturbation: dict[str, Any] = {}
    try:
        session = SandboxSession(recorder.workspace, [], sandbox_cfg, published=recorder.published)
        backend = resolve_factory(backend_factory)(
            BackendRequest(
                task=task,
                init_state=init_state,
                seed=seed,
                workspace=recorder.published,
                session_workspace=session.session_workspace,
                episode_id=episode_id,
                driver_options=dict(driver_options or {}),
            )
        )
        if recorder.mcap is not None and backend.driver is not None:
            recorder.mcap.attach_driver(backend.driver)  # joint states, TF, wrench, frames in sim time
        info = backend.task
        perturb = list((getattr(info, "extra", None) or {}).get("perturb_axes", []))
        recorder.meta["perturb_axes"] = perturb
        perturbation = dict((getattr(info, "extra", None) or {}).get("perturbation") or {})
        gate = CompletionGate(standards_for(tuple(getattr(info, "goals", ()) or ()), cfg.gate,
                                            (getattr(info, "extra", None) or {}).get("table_regions")), cfg.gate)
        backend.api.register("finish", gate.primitive(backend.api), physical=False, group="finish")
        task_md = render_task_md(
            TaskMdContext(
                instruction=info.instruction,
                standards=gate.standards,
                limits=cfg.limits,
                gate=cfg.gate,
                workspace=session.session_workspace,
                cell_timeout_s=cfg.loop.cell_timeout_s,
                max_output_tokens=cfg.loop.max_output_tokens,
                max_images=cfg.history.max_images,
            ),
            backend.api.specs,
        )
        write_workspace_file(recorder.published, "TASK.md", task_md.encode("utf-8"))
        write_workspace_file(recorder.published, "NOTES.md", NOTES_MD.encode("utf-8"))
        task_images = _initial_images(backend, recorder)
        session.specs = client_specs(backend)
        session.start()
        history = History(
            system_message_text(task_md, cfg.system_prompt or SYSTEM_PROMPT),
            environment_context_text(session.session_workspace, date=cfg.date),
            task_request_text(info.instruction),
            task_images,
            cfg.history,
        )
        budget = Budget(cfg.limits)
        backend.api.budget = budget
        router = CallRouter(
            backend.api, recorder.workspace, session.session_workspace, cfg.loop.max_calls_per_cell,
            published=recorder.published,
        )
        loop = EpisodeLoop(
            episode_id=episode_id,
            session=session,
            router=router,
            history=history,
            policy=client,
            recorder=recorder,
            budget=budget,
            config=cfg.loop,
            host_context=backend.host_context,
            on_event=on_event,
            before_request=before_request,
        )
        loop_result = loop.run()
        error = loop_result.error
        if cfg.loop.record_snapshots and backend.host_context is not None and not loop_result.stopped_by_hook:
            recorder.write_snapshot(loop_result.requests + 1, backend.host_context())
    except Exception as exc:  # the episode ends cleanly, with its record
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
        if loop is not None:
            loop_result = loop.result
            loop_result.end_reason = "harness_error"
    finally:
        if session is not None:
            session.close()
    if backend is not None and backend.check_success is not None:
        try:
            host_success = bool(backend.check_success())
        except Exception as exc:  # a failing predicate is reported, not raised
            error = (error or "") + f"\nhost success check failed: {type(exc).__name__}: {exc}"
    end_reason = loop_result.end_reason if loop_result is not None else "harness_error"
    if loop_result is not None and error and end_reason not in ("policy_unavailable", "policy_error",
                                                                   "robot_call_timeout"):
        end_reason = "harness_error"
    finished = bool(router and router.finished)
    label = classify(host_success, finished, end_reason)
    api = backend.api if backend is not None else None
    outcome = EpisodeOutcome(
        episode_id=episode_id,
        task=task,
        suite=suite,
        task_id=recorder.meta["task_id"],
        init_state=init_state,
        seed=seed,
        policy=client.name,
        outcome=label.value,
        end_reason=end_reason,
        host_success=host_success,
        strict_success=bool(host_success) and finished,
        finished=finished,
        false_finish=finished and host_success is False,
        missed_finish=bool(host_success) and not finished,
        budget_exhausted=end_reason.startswith("budget_"),
        requests=loop_result.requests if loop_result else 0,
        physical_actions=api.budget.physical_actions_used if api else 0,
        wall_time_s=round(time.monotonic() - started, 3),
        policy_s_total=round(sum(loop_result.policy_s), 3) if loop_result else 0.0,
        robot_s_total=round(sum(loop_result.robot_s), 3) if loop_result else 0.0,
        harness_s_per_request=[round(x, 5) for x in loop_result.harness_s] if loop_result else [],
        gate_rejections=len(gate.rejections) if gate else 0,
        gate_accepted_on_evidence=bool(gate and gate.accepted_on_evidence),
        session_restarts=session.restarts if session else 0,
        protections=session.protections.to_dict() if session else {},
        record_dir=str(recorder.episode_dir),
        error=error,
        perturbation=perturbation,
    )
    try:
        recorder.finalize(outcome.to_dict(), host_success)
    finally:
        if backend is not None and backend.close is not None:
            with contextlib.suppress(Exception):
                backend.close()
        if own_policy:
            client.close()
    return outcome


# --------------------------------------------------------------------- rollouts
def parse_range(text: str) -> list[int]:
    """``"11-16"`` -> [11..16]; ``"1,3,5-7"`` -> [1, 3, 5, 6, 7]."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part[1:]:
            lo, hi = part.split("-", 1) if not part.startswith("-") else (part, part)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def suite_tasks(suite: str, tasks: str | None = None) -> list[str]:
    """Task names ``suite/<i>``: the given indices/names, or every task of a LIBERO suite."""
    if tasks:
        items = [t.strip() for t in tasks.split(",") if t.strip()]
        if all(t.replace("-", "").isdigit() for t in items):
            return [f"{suite}/{i}" for i in parse_range(tasks)]
        return [f"{suite}/{t}" for t in items]
    if suite in LIBERO_SUITE_SIZES:
        return [f"{suite}/{i}" for i in range(LIBERO_SUITE_SIZES[suite])]
    raise ValueError(
        f"suite {suite!r} has no known task list; give tasks, e.g. --tasks 0-3 or --tasks cube_on_plate"
    )


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    """Run one episode in a worker process; returns its outcome dict."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        outcome = run_episode(
            job["task"],
            policy=PolicySpec(job["policy"], job["policy_options"]),
            out_dir=job["out_dir"],
            backend_factory=job["factory"],
            init_state=job["init_state"],
            seed=job.get("seed"),
            config=job["config"],
            driver_options=job.get("driver_options"),
        )
        return outcome.to_dict()
    except Exception as exc:  # one broken episode must not stop the rollout
        return {
            "task": job["task"],
            "init_state": job["init_state"],
            "seed": job.get("seed"),
            "outcome": "infrastructure_failure",
            "end_reason": "harness_error",
            "error": f"{type(exc).__name__}: {exc}",
            "requests": 0,
            "physical_actions": 0,
            "wall_time_s": 0.0,
            "harness_s_per_request": [],
        }


def summarize(outcomes: Sequence[dict[str, Any]], wall_s: float, workers: int) -> dict[str, Any]:
    """Rates and means over episodes (infrastructure failures are counted, not rated)."""
    valid = [o for o in outcomes if o.get("outcome") != "infrastructure_failure"]
    n = len(valid)

    def rate(key: str) -> float:
        return round(sum(1 for o in valid if o.get(key)) / n, 4) if n else 0.0

    def mean(key: str) -> float:
        return round(statistics.fmean(float(o.get(key) or 0.0) for o in valid), 3) if n else 0.0

    per_request = [x for o in valid for x in o.get("harness_s_per_request") or []]
    cores = max(1, min(workers, os.cpu_count() or 1))
    return {
        "episodes": len(outcomes),
        "valid_episodes": n,
        "infrastructure_failures": len(outcomes) - n,
        # randomized starts: official states re-drawn because they gave no layout (each
        # episode still ran on a built start), and starts that could not be built at all
        "start_redraws": sum(int((o.get("perturbation") or {}).get("layout_redraws") or 0) for o in outcomes),
        "starts_not_built": sum(1 for o in outcomes if "LayoutError" in str(o.get("error") or "")),
        "host_success": rate("host_success"),
        "strict_success": rate("strict_success"),
        "false_finish": rate("false_finish"),
        "missed_finish": rate("missed_finish"),
        "budget_exhausted": rate("budget_exhausted"),
        "mean_requests": mean("requests"),
        "mean_physical_actions": mean("physical_actions"),
        "mean_wall_time_s": mean("wall_time_s"),
        "harness_s_per_request_median": round(statistics.median(per_request), 5) if per_request else None,
        "episodes_per_hour_per_core": round(len(outcomes) / (wall_s / 3600.0) / cores, 3)
        if wall_s > 0
        else 0.0,
        "wall_s": round(wall_s, 3),
        "workers": workers,
    }


def rollout(
    tasks: Sequence[str],
    states: Sequence[int],
    *,
    policy: PolicySpec,
    out_dir: str | Path,
    backend_factory: BackendFactory | str | None = None,
    episodes: int | None = None,
    workers: int = 1,
    config: EpisodeConfig | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    seeds: Sequence[int] | None = None,
    driver_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``episodes`` episodes over the (task, initial state) grid (cycled) in ``workers``
    processes; returns the summary plus ``outcomes`` (one dict per episode). With
    ``seeds`` the grid is (task, seed) random starts instead (``init_state`` -1);
    ``driver_options`` go to every episode's driver (``BackendRequest.driver_options``)."""
    cfg = config or EpisodeConfig()
    grid: list[tuple[str, int, int | None]] = (
        [(t, -1, seed) for t in tasks for seed in seeds] if seeds is not None
        else [(t, s, None) for t in tasks for s in (states or [-1])])
    if not grid:
        raise ValueError("rollout needs at least one task")
    total = episodes if episodes is not None else len(grid)
    factory = factory_reference(backend_factory)
    jobs = [
        {
            "task": grid[i % len(grid)][0],
            "init_state": grid[i % len(grid)][1],
            "seed": grid[i % len(grid)][2],
            "driver_options": dict(driver_options or {}),
            "policy": policy.name,
            "policy_options": dict(policy.options),
            "out_dir": str(out_dir),
            "factory": factory,
            "config": cfg,
        }
        for i in range(total)
    ]
    started = time.monotonic()
    outcomes: list[dict[str, Any]] = []
    if workers <= 1:
        for job in jobs:
            outcomes.append(_worker(job))
            if progress is not None:
                progress(outcomes[-1])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            futures = [pool.submit(_worker, job) for job in jobs]
            for future in as_completed(futures):
                outcomes.append(future.result())
                if progress is not None:
                    progress(outcomes[-1])
    summary = summarize(outcomes, time.monotonic() - started, workers)
    summary["outcomes"] = outcomes
    return summary


def summary_json_line(summary: dict[str, Any]) -> str:
    """The rollout's last line: the summary without per-episode outcomes."""
    return json.dumps({k: v for k, v in summary.items() if k != "outcomes"})
