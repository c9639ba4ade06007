"""Row order for a given world size (``mix_order``) and the loss constant (``sup_tokens``).

The released rows are in *global training order*: the run used 16 ranks with one row per
rank per step, so global row ``g`` was trained at micro-step ``g // 16`` on rank ``g % 16``.
Our trainer gives every rank one contiguous shard of the prepared file, read front to back.
:func:`mix_order` writes that layout for ``W`` ranks while keeping the relative order: rank
``r`` at micro-step ``m`` trains global row ``m * W + r``. With gradient accumulation ``A``,
an optimizer step covers ``W * A`` consecutive global rows; rows after the last complete
optimizer step are dropped (and reported), so every rank runs the same number of steps.

The loss of a step is ``sum(weight * token NLL) / C_step`` over all supervised tokens of the
step, with a constant ``C_step`` rather than the step's own token count, so every token has
the same weight whatever the other rows of its step are. :func:`sup_tokens` sets
``C_row = supervised tokens / rows`` over the rows to train and ``C_step = C_row * W * A``
(the expected supervised tokens per optimizer step). Each rank back-propagates
``sum(weight * NLL) / (C_row * A)`` of its row; averaging gradients over the ``W`` ranks
gives exactly the step loss above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass


def mix_order(n_rows: int, world_size: int, grad_accum: int = 1) -> list[int]:
    """Source row index of every position of the re-ordered file (shard-major).

    Args:
        n_rows: rows in global training order.
        world_size: number of ranks ``W``.
        grad_accum: micro-steps per optimizer step ``A``.

    Returns:
        ``order`` with ``order[r * S + m] = m * W + r`` for rank ``r`` and micro-step ``m``,
        where ``S`` is the number of rows per rank. Its length is the largest multiple of
        ``W * A`` not above ``n_rows``.
    """
    if world_size < 1 or grad_accum < 1:
        raise ValueError(f"world_size ({world_size}) and grad_accum ({grad_accum}) must be >= 1")
    block = world_size * grad_accum
    per_rank = (n_rows // block) * block // world_size
    return [m * world_size + r for r in range(world_size) for m in range(per_rank)]


def shard_position(rank: int, micro_step: int, rows_per_rank: int) -> int:
    """Position in the re-ordered file of the row that ``rank`` trains at ``micro_step``."""
    return rank * rows_per_rank + micro_step % rows_per_rank


@dataclass(frozen=True)
class LossConstant:
    """The loss normaliser of a run.

    Attributes:
        n_rows: rows that will be trained (one pass).
        supervised_tokens: supervised tokens over those rows.
        world_size, grad_accum: the run layout.
        per_row: ``C_row``, mean supervised tokens per row (each rank divides by ``C_row * A``).
        per_step: ``C_step = C_row * W * A``, expected supervised tokens per optimizer step.
    """

    n_rows: int
    supervised_tokens: int
    world_size: int
    grad_accum: int
    per_row: float
    per_step: float

    def to_dict(self) -> dict[str, float | int]:
        """JSON-serialisable form."""
        return asdict(self)


def sup_tokens(supervised_counts: Sequence[int], world_size: int = 1, grad_accum: int = 1) -> LossConstant:
    """The loss constant from the supervised-token count of every row that will be trained."""
    n_rows = len(supervised_counts)
    total = int(sum(int(c) for c in supervised_counts))
    if n_rows == 0 or total == 0:
        raise ValueError("no supervised tokens: the loss constant is undefined (check meta.turn_index / "
                         "supervise_turns / nosup_reason of the rows)")
    per_row = total / n_rows
    return LossConstant(n_rows=n_rows, supervised_tokens=total, world_size=world_size, grad_accum=grad_accum,
                        per_row=per_row, per_step=per_row * world_size * grad_accum)
