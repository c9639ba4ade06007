"""Exceptions of the SFT pipeline. Every one derives from ``SFTError``."""

from __future__ import annotations


class SFTError(Exception):
    """Base of every error raised by ``captain_training.sft`` and ``captain_training.datagen``."""


class RowFormatError(SFTError):
    """A row of the data file is malformed.

    Attributes:
        line_number: 1-based line of the row in its file (0 when not read from a file).
        problems: every problem found in that row, each saying what to change.
    """

    def __init__(self, line_number: int, problems: list[str], source: str = "") -> None:
        self.line_number = line_number
        self.problems = list(problems)
        self.source = source
        where = f"{source}:{line_number}" if source else f"line {line_number}"
        super().__init__(f"{where}: " + "; ".join(self.problems))


class RowTooLongError(SFTError):
    """A row renders to more tokens than ``--max-length``; rows are never truncated."""

    def __init__(self, line_number: int, row_id: str, n_tokens: int, max_length: int) -> None:
        self.line_number = line_number
        self.row_id = row_id
        self.n_tokens = n_tokens
        self.max_length = max_length
        super().__init__(
            f"line {line_number} (id {row_id!r}) renders to {n_tokens} tokens, more than --max-length "
            f"{max_length}; rows are never truncated: raise --max-length or remove the row"
        )


class RenderError(SFTError):
    """A row could not be rendered (missing image, template and tokenizer disagree, ...)."""


class ImageError(RenderError):
    """An image of a row is missing or unreadable."""


class PreparedDataError(SFTError):
    """A prepared data directory is missing, incomplete, or was prepared for another setup."""


class ConfigError(SFTError):
    """A training option is invalid."""


class CheckpointError(SFTError):
    """A checkpoint is missing, incomplete, or does not match the run."""


class EpisodeRecordError(SFTError):
    """An episode record given to ``captain datagen`` is malformed."""
