"""Which assistant turns of a row are supervised, and with what weight.

The rules (data card, "meta fields"):

* ``meta.nosup_reason`` present: nothing in the row is supervised.
* ``meta.supervise_turns`` (prefix-packed rows): exactly those assistant-turn ordinals.
* otherwise ``meta.turn_index`` (per-request rows): only that turn, the last one.
* otherwise (visual-QA packs): every assistant turn.

Every supervised token of a row has the same weight: ``meta.loss_weight`` (default 1),
times the QA loss weight (0.5 in the paper) when ``meta.source == "qapack"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from captain_training.sft.rows import assistant_message_indices

#: Loss weight of visual-QA rows in the CaPtain-4B-SFT run.
DEFAULT_QA_LOSS_WEIGHT = 0.5


@dataclass(frozen=True)
class SupervisionPolicy:
    """Trainer-side supervision settings.

    Attributes:
        qa_loss_weight: weight multiplier of rows with ``meta.source == "qapack"``.
    """

    qa_loss_weight: float = DEFAULT_QA_LOSS_WEIGHT


@dataclass(frozen=True)
class RowSupervision:
    """The supervision of one row.

    Attributes:
        turns: supervised assistant-turn ordinals (0 = first assistant message), increasing.
        weight: loss weight of every supervised token.
        reason: why nothing is supervised (``None`` when something is).
    """

    turns: tuple[int, ...]
    weight: float
    reason: str | None = None

    @property
    def supervised(self) -> bool:
        """True when at least one token of the row carries loss."""
        return bool(self.turns) and self.weight > 0


def select_supervision(row: dict[str, Any], policy: SupervisionPolicy | None = None) -> RowSupervision:
    """Apply the data card's rules to a (well-formed) row."""
    policy = policy or SupervisionPolicy()
    meta = row.get("meta") or {}
    if meta.get("nosup_reason") is not None:
        return RowSupervision((), 0.0, f"nosup_reason: {meta['nosup_reason']}")
    weight = meta.get("loss_weight")
    weight = 1.0 if weight is None else float(weight)
    if meta.get("source") == "qapack":
        weight *= policy.qa_loss_weight
    n_turns = len(assistant_message_indices(row["messages"]))
    if meta.get("supervise_turns") is not None:
        turns = tuple(int(t) for t in meta["supervise_turns"])
    elif meta.get("turn_index") is not None:
        turns = (int(meta["turn_index"]),)
    else:
        turns = tuple(range(n_turns))
    if not turns:
        return RowSupervision((), 0.0, "meta.supervise_turns is empty")
    if weight <= 0:
        return RowSupervision(turns, 0.0, "loss weight is 0")
    return RowSupervision(turns, weight)
