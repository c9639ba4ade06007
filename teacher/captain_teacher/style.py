"""Variety for training data: per-episode style choices and optional injected mistakes.

A ``Style`` is drawn once per episode from the teacher's random generator. It changes
how the teacher writes its code (speeds, hover heights, whether it previews with
``check_motion``, inspects the contact before closing, re-measures from the wrist camera
while holding, waits for the object to settle, finishes in the verifying cell or in a
request of its own, keeps notes) without changing what succeeds.

A mistake is a deliberate, recoverable error (closing the jaws too high, descending too
fast into a guarded stop, releasing off target). The request that makes it is flagged
``injected_mistake`` in the records (and left unsupervised); the requests that follow
show the recovery.

A failure is a deliberate, unrecovered error for training a critic: the jaws close a
few centimetres beside the object (``perturbed_grasp``) or the object is released a few
centimetres off its destination (``perturbed_place``), after which the teacher carries on
as if nothing had gone wrong (it carries the empty hand, verifies and finishes), so the
episode ends in a host failure. The request that makes it is flagged ``injected_failure``
(and every later request of the episode ``after_injected_failure``), all unsupervised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

#: Injected mistakes the teacher knows how to recover from.
MISTAKES = ("grasp_too_high", "fast_descent", "release_off_target")
#: Injected failures the teacher does not notice (see the module docstring).
FAILURES = ("perturbed_grasp", "perturbed_place")


@dataclass(frozen=True)
class Style:
    """How one episode's code is written (see the module docstring).

    Attributes:
        approach_speed_m_s: speed of free-space moves.
        descend_speed_scale: factor on each grasp's descent speed.
        carry_speed_m_s: speed while carrying (manipulation mode).
        hover_m: extra hover height above a grasp before the final descent.
        lift_extra_m: extra clearance when lifting a held object.
        check_first: call ``check_motion`` on the grasp pose before moving.
        inspect_contact: call ``inspect_contact_geometry`` before closing the jaws.
        wrist_remeasure: re-measure the held object and destination from the wrist
            camera before releasing.
        settle_hold_s: ``hold()`` after releasing (0: none).
        finish_inline: call ``finish()`` in the verifying cell when the numbers are in
            tolerance (else in a request of its own).
        notes: write a line to NOTES.md after each placement.
        attach_wrist: attach the wrist image when observing.
        mistake: the injected mistake of this episode, or None.
        failure: the injected, unrecovered failure of this episode, or None (an episode
            has a mistake or a failure, not both).
    """

    approach_speed_m_s: float = 0.1
    descend_speed_scale: float = 1.0
    carry_speed_m_s: float = 0.08
    hover_m: float = 0.06
    lift_extra_m: float = 0.05
    check_first: bool = False
    inspect_contact: bool = False
    wrist_remeasure: bool = False
    settle_hold_s: float = 0.0
    finish_inline: bool = True
    notes: bool = False
    attach_wrist: bool = True
    mistake: str | None = None
    failure: str | None = None


def plain_style() -> Style:
    """The default style (no randomisation, no mistakes)."""
    return Style()


def draw_style(rng: np.random.Generator, mistake_rate: float = 0.0,
               mistakes: tuple[str, ...] = MISTAKES, failure_rate: float = 0.0,
               failures: tuple[str, ...] = FAILURES) -> Style:
    """A random style; with probability ``mistake_rate`` one of ``mistakes`` is injected,
    and with probability ``failure_rate`` one of ``failures`` instead (drawn last, so a
    seeded run without failures draws the same styles as before)."""
    mistake = None
    if mistakes and rng.random() < mistake_rate:
        mistake = str(rng.choice(list(mistakes)))
    style = Style(
        approach_speed_m_s=float(rng.choice([0.08, 0.1, 0.12, 0.15])),
        descend_speed_scale=float(rng.choice([0.75, 0.9, 1.0])),
        carry_speed_m_s=float(rng.choice([0.06, 0.08, 0.1])),
        hover_m=float(rng.choice([0.05, 0.06, 0.08, 0.1])),
        lift_extra_m=float(rng.choice([0.04, 0.05, 0.07])),
        check_first=bool(rng.random() < 0.3),
        inspect_contact=bool(rng.random() < 0.3),
        wrist_remeasure=bool(rng.random() < 0.25),
        settle_hold_s=float(rng.choice([0.0, 0.0, 0.5, 1.0])),
        finish_inline=bool(rng.random() < 0.6),
        notes=bool(rng.random() < 0.4),
        attach_wrist=bool(rng.random() < 0.7),
        mistake=mistake,
    )
    return with_failure(style, rng, failure_rate, failures)


def with_failure(style: Style, rng: np.random.Generator, failure_rate: float,
                 failures: tuple[str, ...] = FAILURES) -> Style:
    """``style`` with one of ``failures`` injected with probability ``failure_rate`` (no
    random draw at all when the rate is 0); an injected failure replaces the mistake."""
    if not failures or failure_rate <= 0.0 or rng.random() >= failure_rate:
        return style
    return replace(style, failure=str(rng.choice(list(failures))), mistake=None)
