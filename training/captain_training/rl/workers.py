"""Rollout workers: run a round's ``RolloutJob``s and return the collected episodes.

Three pools behind one interface (``pool.run(jobs) -> list[dict]``, in job order):

* ``inline``: in the calling process, one episode after another (a laptop, tests);
* ``process``: ``workers`` spawned processes (``ProcessPoolExecutor``), each episode in a
  fresh sandboxed session and simulator;
* ``ray``: ``workers`` Ray actors (``RolloutActor``), each holding its own process. On a
  cluster the actors are placed beside the vLLM policy servers; each job names the
  endpoint it talks to (``policy_options["base_url"]``), and after each optimiser step
  the trainer synchronises the servers' weights before the next round's jobs go out.

Streaming (``submit(jobs) -> handle``, ``wait(handle) -> list[dict]``): the process and Ray
pools start a round's episodes and return at once, so the trainer updates the policy while
they run (``rollout.mode: streaming``); the inline pool runs episodes in the trainer's own
thread (the session's cell timeout needs the main thread's signals) and cannot stream.

``make_pool("auto")`` picks ``ray`` when Ray imports and ``workers > 1``, else
``process`` for ``workers > 1``, else ``inline``. ``make_pool("ros", namespaces=...)``
runs episodes on running sim stacks (``ros_pool.RosPool``; ``workers`` is not read: one
episode per stack at a time).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from captain_training.rl.errors import ConfigError
from captain_training.rl.rollout import RolloutJob, collect_episode, job_to_dict

POOL_KINDS = ("auto", "inline", "process", "ray", "ros")


def _safe_collect(job: dict[str, Any]) -> dict[str, Any]:
    """``collect_episode`` that never raises (a broken episode must not stop a round)."""
    import traceback

    try:
        return collect_episode(job)
    except Exception as exc:
        return {"job": job, "usable": False, "end_reason": "harness_error", "termination": "error",
                "host_success": False, "requests": 0, "critic_values": [], "wall_s": 0.0,
                "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"}


def _process_init() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MUJOCO_GL", "egl")


class InlinePool:
    """Episodes one after another in this process."""

    kind = "inline"

    streams = False

    def run(self, jobs: Sequence[RolloutJob]) -> list[dict[str, Any]]:
        return [_safe_collect(job_to_dict(j)) for j in jobs]

    def submit(self, jobs: Sequence[RolloutJob]) -> Any:
        raise ConfigError("rollout.mode streaming needs rollout.pool process or ray (inline episodes run in the "
                          "trainer's thread)")

    def close(self) -> None:
        return None


class ProcessPool:
    """Episodes in ``workers`` spawned processes."""

    kind = "process"

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.workers = int(workers)
        self.executor = ProcessPoolExecutor(max_workers=self.workers, initializer=_process_init,
                                            mp_context=multiprocessing.get_context("spawn"))

    streams = True

    def run(self, jobs: Sequence[RolloutJob]) -> list[dict[str, Any]]:
        return self.wait(self.submit(jobs))

    def submit(self, jobs: Sequence[RolloutJob]) -> Any:
        """Start the episodes; returns their futures (in job order)."""
        return [self.executor.submit(_safe_collect, job_to_dict(j)) for j in jobs]

    def wait(self, handle: Any) -> list[dict[str, Any]]:
        return [f.result() for f in handle]

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def _ray_actor_class() -> Any:
    import ray

    @ray.remote
    class RolloutActor:
        """One rollout worker process (a Ray actor)."""

        def __init__(self) -> None:
            _process_init()

        def collect(self, job: dict[str, Any]) -> dict[str, Any]:
            return _safe_collect(job)

    return RolloutActor


class RayPool:
    """Episodes on ``workers`` Ray actors (local Ray when no cluster address is set)."""

    kind = "ray"

    def __init__(self, workers: int, address: str | None = None, num_cpus: int | None = None) -> None:
        import ray

        self.started_here = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "ignore_reinit_error": True}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = num_cpus or max(int(workers), 1)
            env = {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "MUJOCO_GL", "CAPTAIN_CACHE_DIR")}
            if env:
                kwargs["runtime_env"] = {"env_vars": env}
            ray.init(**kwargs)
            self.started_here = True
        actor = _ray_actor_class()
        self.actors = [actor.remote() for _ in range(max(int(workers), 1))]

    streams = True

    def run(self, jobs: Sequence[RolloutJob]) -> list[dict[str, Any]]:
        return self.wait(self.submit(jobs))

    def submit(self, jobs: Sequence[RolloutJob]) -> Any:
        """Queue the episodes on the actors (they keep producing while the caller works); returns refs."""
        return [self.actors[i % len(self.actors)].collect.remote(job_to_dict(j)) for i, j in enumerate(jobs)]

    def wait(self, handle: Any) -> list[dict[str, Any]]:
        import ray

        return list(ray.get(handle))

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self.started_here and ray.is_initialized():
            ray.shutdown()


def ray_available() -> bool:
    """Whether Ray imports here."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def make_pool(kind: str = "auto", workers: int = 1, ray_address: str | None = None,
              namespaces: Sequence[str] = ()) -> Any:
    """A rollout pool (see the module docstring)."""
    if kind not in POOL_KINDS:
        raise ConfigError(f"rollout pool {kind!r} is not one of {list(POOL_KINDS)}")
    if kind == "ros":
        from captain_training.rl.ros_pool import RosPool

        return RosPool(namespaces)
    if namespaces:
        raise ConfigError(f"rollout namespaces are read only by the ros pool, not {kind!r}")
    if workers < 1:
        raise ConfigError(f"rollout workers must be >= 1, got {workers}")
    if kind == "auto":
        kind = "ray" if workers > 1 and ray_available() else ("process" if workers > 1 else "inline")
    if kind == "ray":
        if not ray_available():
            raise ConfigError("rollout pool 'ray' needs the ray package (pip install ray); or use "
                              "'process' / 'inline'")
        return RayPool(workers, ray_address)
    if kind == "process":
        return ProcessPool(workers)
    return InlinePool()
