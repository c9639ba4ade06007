"""Exceptions of the evaluation core. Every one derives from ``EvalError``."""

from __future__ import annotations


class EvalError(Exception):
    """Base of every error raised by ``captain_training.eval``."""


class ResultFileError(EvalError):
    """A result file is missing, malformed or lacks required keys."""


class PairingError(EvalError):
    """Two result sets cannot be paired on identical (suite, task, initial-state) triples."""
