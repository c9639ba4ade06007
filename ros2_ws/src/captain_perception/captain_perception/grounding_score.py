"""Top-1 accuracy of ``segment(text)`` on LIBERO scenes with LIBERO's own words: tests and
benchmarks only.

Prompts come from the task's instruction (``catalogue.get_task(...).instruction``): the
object to pick (``"pick up the black bowl between the plate and the ramekin and place it
on the plate"`` -> ``"black bowl between the plate and the ramekin"``) and where it goes
(``"plate"``). The right answer is the first object of the first goal predicate of the
task's BDDL file (``(On akita_black_bowl_1 plate_1)``: the pick phrase names
``akita_black_bowl_1``, the place phrase ``plate_1``). libero_spatial puts two identical
black bowls in every scene, so only the words after the noun tell them apart.

A prompt is right when ``segment`` succeeds and its best detection overlaps the named
object more than any other entity, with an intersection over union of at least
``MIN_IOU`` against the simulator's segmentation (``scenes.SceneRecord``). A refusal is
wrong. The calls see only the camera frames.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_backends.core.driver import HEAD_CAMERA
from captain_perception.scenes import SceneRecord, SceneSpec

MIN_IOU = 0.5
#: Scenes of the figure: the ten libero_spatial tasks in two official states each.
GROUNDING_SCENES: tuple[SceneSpec, ...] = tuple(SceneSpec(f"libero_spatial/{t}", s)
                                                for t in range(10) for s in (11, 12))

_PICK = re.compile(r"^(?:pick up|pick|grab|take) (?:the |a )?(?P<obj>.+?) and (?:place|put) (?:it|them) "
                   r"(?P<rel>on|in|into|onto|on top of) (?:the |a )?(?P<dest>.+)$")
_GOAL = re.compile(r"\(:goal\s*\(\s*and\s*\(\s*\w+\s+([A-Za-z0-9_]+)\s+([A-Za-z0-9_]+)", re.I)


@dataclass(frozen=True)
class GroundingCase:
    """One prompt and the object it names (LIBERO entity name)."""

    prompt: str
    target: str
    relational: bool


@dataclass(frozen=True)
class GroundingScore:
    """One ``segment`` call: scene key, prompt, target, the entity its best detection
    overlaps most (``""`` when it failed), that overlap's IoU, right or wrong, and the
    failure message."""

    scene: str
    prompt: str
    target: str
    got: str
    iou: float
    correct: bool
    relational: bool
    message: str = ""


def cases_for(task_id: str) -> list[GroundingCase]:
    """The prompts of a task's instruction and the objects they name ([] when the
    instruction is not of the pick-and-place form)."""
    from captain_backends.core.libero.catalogue import get_task
    from captain_perception.core.segmenters.lexicon import parse_prompt

    task = get_task(task_id)
    m = _PICK.match(task.instruction.strip().lower())
    g = _GOAL.search(task.bddl_file.read_text())
    if m is None or g is None:
        return []
    obj, dest = m.group("obj"), m.group("dest")
    return [GroundingCase(obj, g.group(1), parse_prompt(obj).relation is not None),
            GroundingCase(dest, g.group(2), parse_prompt(dest).relation is not None)]


class _ReplayDriver:
    def __init__(self, record: SceneRecord) -> None:
        self.record = record

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        return {k: f for k, f in self.record.frames.items() if names is None or k in names}


def score_record(record: SceneRecord, camera: str = HEAD_CAMERA) -> list[GroundingScore]:
    """Ground every prompt of the record's task in one camera and score the best detection."""
    from captain_perception.core.primitives import Perception

    out: list[GroundingScore] = []
    cases = cases_for(record.spec.task)
    with tempfile.TemporaryDirectory(prefix="captain_grounding_") as tmp:
        perception = Perception(_ReplayDriver(record), tmp,  # type: ignore[arg-type]
                                robot_state=lambda: {"end_effector_position_m": None})
        try:
            handle = perception.observe().result["value"]["observation_handle"]
            for case in cases:
                res = perception.segment(handle, camera, case.prompt).result
                if not res["success"]:
                    out.append(GroundingScore(record.spec.key, case.prompt, case.target, "", 0.0, False,
                                              case.relational, res["message"][:200]))
                    continue
                best = perception.store.detection(res["value"]["detection_id"]).mask.full()
                ious = {}
                for name in record.entity_names:
                    truth = record.object_mask(camera, name)
                    union = int((best | truth).sum())
                    ious[name] = float((best & truth).sum() / union) if union else 0.0
                got = max(ious, key=lambda n: ious[n])
                out.append(GroundingScore(record.spec.key, case.prompt, case.target, got, ious[got],
                                          got == case.target and ious[got] >= MIN_IOU, case.relational))
        finally:
            perception.close()
    return out


def summarise(scores: list[GroundingScore]) -> dict[str, float]:
    """``segment_top1_accuracy`` (all prompts), ``segment_top1_relational_accuracy`` (the
    prompts naming a relation) and how many prompts each counts."""
    rel = [s for s in scores if s.relational]

    def acc(v: list[GroundingScore]) -> float:
        return float(np.mean([s.correct for s in v])) if v else float("nan")

    return {"segment_top1_accuracy": acc(scores), "segment_top1_relational_accuracy": acc(rel),
            "segment_top1_prompts": float(len(scores)), "segment_top1_relational_prompts": float(len(rel))}


def table(scores: list[GroundingScore]) -> str:
    """One line per prompt: scene, right or wrong, what was found, the prompt."""
    lines = [f"{'scene':<24} {'ok':<3} {'got':<34} {'IoU':>5}  prompt"]
    for s in scores:
        lines.append(f"{s.scene:<24} {'yes' if s.correct else 'NO':<3} {(s.got or 'refused')[:34]:<34} "
                     f"{s.iou:5.2f}  {s.prompt}{'  (' + s.message[:80] + ')' if s.message else ''}")
    return "\n".join(lines)
