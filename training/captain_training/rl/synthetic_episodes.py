"""Kinematic pick-and-place episodes as hidden-snapshot sequences, with injected failures.

A stand-in for recorded rollouts when none are at hand (critic benchmarks, offline checks of
the credit pipeline). A scripted agent moves a bowl onto a plate in a kinematic tabletop
(no physics): perception requests leave the scene unchanged up to millimetre settling
jitter; failures are injected by perturbing grasps (the jaws close empty or knock the
bowl away) and placements (the bowl misses the plate, sometimes tipping on its rim);
after a failure the agent retries with some probability; it may also give up,
emit Python-error-only requests, finish on a failed scene (false finish) or forget to
finish on a solved one. Every request records the snapshot taken before it, and the
final snapshot after the last request is kept too.

World frame: z up, table top at ``TABLE_Z_M``; metres.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_training.rl.critic_data import CriticDataset, episode_rows
from captain_training.rl.features import episode_features
from captain_training.rl.returns import RequestRecord, Termination

TABLE_Z_M = 0.90
BOWL = "akita_black_bowl_1"
PLATE = "plate_1"
DISTRACTOR = "cookies_1"
_UPRIGHT = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class TaskProfile:
    """Difficulty of one synthetic task.

    The scripted agent is accurate (grasp offsets ~N(0, 4 mm), placement offsets
    ~N(0, 1 cm)) unless a failure is injected: with ``grasp_perturbation`` a grasp is offset
    by 2-4 cm (it fails: a grasp holds below 1.5 cm), with ``place_perturbation`` a placement
    by 4.5-8 cm (it misses: the bowl lands on the plate below 4 cm).

    Attributes:
        task_id: id used for the critic's task one-hot.
        grasp_perturbation: probability of injecting a failed grasp, per attempt.
        place_perturbation: probability of injecting a missed placement, per attempt.
        retry_probability: chance of retrying after a failed grasp or placement.
        finish_probability: chance of calling finish() once the agent believes it is done.
        max_requests: request budget.
    """

    task_id: str
    grasp_perturbation: float = 0.4
    place_perturbation: float = 0.3
    retry_probability: float = 0.5
    finish_probability: float = 0.85
    max_requests: int = 30


DEFAULT_TASKS: tuple[TaskProfile, ...] = (
    TaskProfile("libero_spatial/0", grasp_perturbation=0.35, place_perturbation=0.25, retry_probability=0.25),
    TaskProfile("libero_goal/2", grasp_perturbation=0.45, place_perturbation=0.35, retry_probability=0.1),
)


def _offset(rng: np.random.Generator, perturb: bool, clean_sigma_m: float, low_m: float, high_m: float
            ) -> np.ndarray:
    """A planar offset: ~N(0, clean_sigma_m) or, when perturbed, 2-D of norm U(low_m, high_m)."""
    if not perturb:
        return rng.normal(0.0, clean_sigma_m, 2)
    angle = rng.uniform(0.0, 2.0 * np.pi)
    return rng.uniform(low_m, high_m) * np.array([np.cos(angle), np.sin(angle)])


@dataclass
class SyntheticEpisode:
    """One scripted episode.

    Attributes:
        snapshots: s_1..s_T (before each request) followed by the final snapshot s_{T+1}.
        requests: what each request did (for costs).
        kinds: a label per request: ``perceive``, ``approach``, ``grasp``, ``lift``, ``carry``,
            ``place``, ``retreat``, ``python_error``, ``finish``.
        grasp_succeeded: per request, True for a grasp request that left the bowl held.
    """

    task_id: str
    group_key: str
    episode_key: str
    snapshots: list[SimSnapshot]
    requests: list[RequestRecord]
    kinds: list[str]
    grasp_succeeded: list[bool]
    host_success: bool
    termination: Termination
    finished: bool = False
    notes: dict[str, float] = field(default_factory=dict)

    @property
    def n_requests(self) -> int:
        return len(self.requests)


class _Scene:
    """Mutable kinematic state of one episode."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        bowl = np.array([rng.uniform(-0.15, 0.15), rng.uniform(-0.22, 0.0), TABLE_Z_M + 0.03])
        while True:
            plate = np.array([rng.uniform(-0.15, 0.15), rng.uniform(0.05, 0.25), TABLE_Z_M + 0.01])
            if np.linalg.norm(plate[:2] - bowl[:2]) > 0.15:
                break
        cookies = np.array([rng.uniform(-0.2, 0.2), rng.uniform(-0.25, 0.25), TABLE_Z_M + 0.02])
        self.pos = {BOWL: bowl, PLATE: plate, DISTRACTOR: cookies}
        self.quat = {BOWL: _UPRIGHT, PLATE: _UPRIGHT, DISTRACTOR: _UPRIGHT}
        self.initial = {k: v.copy() for k, v in self.pos.items()}
        self.ee = np.array([0.0, 0.0, 1.20])
        self.jaw = 1.0
        self.held = False
        self.ever_held = False
        self.grasp_err = 0.0

    def goal_position(self) -> np.ndarray:
        return self.pos[PLATE] + np.array([0.0, 0.0, 0.02])

    def on_plate(self) -> bool:
        d = self.pos[BOWL] - self.goal_position()
        return bool(np.linalg.norm(d[:2]) < 0.04 and abs(d[2]) < 0.015 and not self.held
                    and self.quat[BOWL] == _UPRIGHT)

    def jitter(self) -> None:
        """Millimetre settling noise of resting objects (what a perception request changes)."""
        for name in (BOWL, PLATE, DISTRACTOR):
            if name == BOWL and self.held:
                continue
            self.pos[name] = self.pos[name] + self.rng.normal(0.0, 0.0005, 3) * np.array([1, 1, 0.2])

    def snapshot(self, time_s: float) -> SimSnapshot:
        sat = self.on_plate()
        goal = GoalPredicate("on", (BOWL, PLATE), sat, involves_contact=True)
        return SimSnapshot(
            time_s=time_s,
            ee_position_m=tuple(float(v) for v in self.ee),
            gripper_open_fraction=float(self.jaw),
            object_poses={k: ObjectPose(tuple(float(v) for v in p), self.quat[k])
                          for k, p in self.pos.items()},
            initial_object_poses={k: ObjectPose(tuple(float(v) for v in p), _UPRIGHT)
                                  for k, p in self.initial.items()},
            goals=(goal,),
            target_object=BOWL,
            destination=PLATE,
            goal_position_m=tuple(float(v) for v in self.goal_position()),
            held={BOWL: self.held, PLATE: False, DISTRACTOR: False},
            ever_held={BOWL: self.ever_held, PLATE: False, DISTRACTOR: False},
            success=sat,
        )


def generate_episode(task: TaskProfile, layout_seed: int, agent_seed: int, group_key: str | None = None,
                     episode_key: str | None = None) -> SyntheticEpisode:
    """One scripted episode; ``layout_seed`` fixes the start state, ``agent_seed`` the agent."""
    scene = _Scene(np.random.default_rng(layout_seed))
    rng = np.random.default_rng([agent_seed, layout_seed])
    snapshots: list[SimSnapshot] = []
    requests: list[RequestRecord] = []
    kinds: list[str] = []
    grasped: list[bool] = []
    finished = False
    termination = Termination.BUDGET
    # the agent's hidden "believed phase" drives the script
    phase = "perceive"
    gave_up = False
    max_t = task.max_requests

    def request(kind: str, actions: int = 0, failed: int = 0, error_only: bool = False,
                finish: bool = False, grasp_ok: bool = False) -> None:
        requests.append(RequestRecord(physical_actions=actions, failed_actions=failed,
                                      python_error_only=error_only, solved_before=snapshots[-1].success,
                                      accepted_finish=finish))
        kinds.append(kind)
        grasped.append(grasp_ok)

    for t in range(1, max_t + 1):
        snapshots.append(scene.snapshot(time_s=6.7 * (t - 1)))
        if rng.random() < 0.05:
            request("python_error", error_only=True)
            continue
        if phase == "perceive" or (phase != "done" and rng.random() < 0.25):
            scene.jitter()
            request("perceive")
            if phase == "perceive":
                phase = "approach"
            continue
        if phase == "approach":
            err = _offset(rng, rng.random() < task.grasp_perturbation, 0.004, 0.02, 0.04)
            scene.ee = scene.pos[BOWL] + np.array([err[0], err[1], 0.10])
            scene.grasp_err = float(np.linalg.norm(err))
            request("approach", actions=1)
            phase = "grasp"
        elif phase == "grasp":
            scene.ee = scene.ee - np.array([0.0, 0.0, 0.10])
            scene.jaw = 0.0
            if scene.grasp_err < 0.015:
                scene.held = scene.ever_held = True
                scene.jaw = 0.35
                request("grasp", actions=2, grasp_ok=True)
                phase = "lift"
            else:
                if rng.random() < 0.5:  # knocked away
                    push = rng.normal(0.0, 0.04, 2)
                    scene.pos[BOWL] = scene.pos[BOWL] + np.array([push[0], push[1], 0.0])
                    if rng.random() < 0.3:
                        scene.quat[BOWL] = (0.7071, 0.7071, 0.0, 0.0)
                request("grasp", actions=2, failed=1)
                scene.ee = scene.ee + np.array([0.0, 0.0, 0.10])
                scene.jaw = 1.0
                if rng.random() < task.retry_probability and scene.quat[BOWL] == _UPRIGHT:
                    phase = "approach"
                else:
                    phase, gave_up = "done", True
        elif phase == "lift":
            scene.ee = scene.ee + np.array([0.0, 0.0, 0.12])
            scene.pos[BOWL] = scene.pos[BOWL] + np.array([0.0, 0.0, 0.12])
            request("lift", actions=1)
            phase = "carry"
        elif phase == "carry":
            err = _offset(rng, rng.random() < task.place_perturbation, 0.01, 0.045, 0.08)
            target = scene.goal_position() + np.array([err[0], err[1], 0.12])
            offset = scene.pos[BOWL] - scene.ee
            scene.ee = target - offset
            scene.pos[BOWL] = target.copy()
            request("carry", actions=1)
            phase = "place"
        elif phase == "place":
            scene.pos[BOWL] = scene.pos[BOWL] - np.array([0.0, 0.0, 0.12])
            scene.ee = scene.ee - np.array([0.0, 0.0, 0.12])
            scene.jaw = 1.0
            scene.held = False
            d = np.linalg.norm(scene.pos[BOWL][:2] - scene.goal_position()[:2])
            if d >= 0.04:  # missed the plate: lands on the table, maybe tipped on the rim
                scene.pos[BOWL][2] = TABLE_Z_M + 0.03
                if d < 0.07 and rng.random() < 0.5:
                    scene.quat[BOWL] = (0.9239, 0.3827, 0.0, 0.0)
            request("place", actions=2)
            phase = "retreat"
        elif phase == "retreat":
            scene.ee = scene.ee + np.array([0.0, 0.0, 0.15])
            request("retreat", actions=1)
            if scene.on_plate():
                phase = "done"
            elif rng.random() < task.retry_probability and scene.quat[BOWL] == _UPRIGHT:
                phase = "approach"
            else:  # the agent usually notices the miss and gives up; sometimes it believes it is done
                phase, gave_up = "done", rng.random() < 0.7
        elif phase == "done":
            believes_done = not gave_up
            if believes_done and rng.random() < task.finish_probability:
                request("finish", finish=True)
                finished, termination = True, Termination.FINISH
                break
            if gave_up and rng.random() < 0.15:
                request("finish", finish=True)
                finished, termination = True, Termination.FINISH
                break
            scene.jitter()
            request("perceive")
    snapshots.append(scene.snapshot(time_s=6.7 * len(requests)))
    host = snapshots[-1].success
    return SyntheticEpisode(
        task_id=task.task_id, group_key=group_key or f"{task.task_id}@{layout_seed}",
        episode_key=episode_key or f"{task.task_id}@{layout_seed}#{agent_seed}",
        snapshots=snapshots, requests=requests, kinds=kinds, grasp_succeeded=grasped,
        host_success=host, termination=termination, finished=finished,
    )


def generate_episodes(n_start_states: int, group_size: int = 4,
                      tasks: tuple[TaskProfile, ...] = DEFAULT_TASKS,
                      seed: int = 0) -> list[SyntheticEpisode]:
    """``n_start_states`` start states (cycling through ``tasks``), each rolled out ``group_size`` times."""
    episodes = []
    for s in range(n_start_states):
        task = tasks[s % len(tasks)]
        layout_seed = seed * 1_000_003 + s
        for g in range(group_size):
            episodes.append(generate_episode(task, layout_seed, agent_seed=seed * 7919 + s * group_size + g))
    return episodes


def episode_dataset(episodes: list[SyntheticEpisode]) -> CriticDataset:
    """Critic rows x(s_t), t, task, host success for t = 1..T of every episode."""
    parts = []
    for ep in episodes:
        x = episode_features(ep.snapshots[:-1], ep.snapshots[0])
        parts.append(episode_rows(ep.episode_key, ep.task_id, x, ep.host_success, ep.group_key))
    return CriticDataset.concatenate(parts)
