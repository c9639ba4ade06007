"""Errors of the LIBERO backend. All derive from ``BackendError`` through ``LiberoError``."""

from __future__ import annotations

from captain_backends.core.errors import BackendError


class LiberoError(BackendError):
    """Base of every error raised by the LIBERO backend."""


class UnknownSuiteError(LiberoError):
    """The requested suite is not a LIBERO suite, or its files are not installed."""


class UnknownTaskError(LiberoError):
    """The task id does not name a task of an installed suite."""


class InvalidInitStateError(LiberoError):
    """The requested official initial state does not exist for the task."""


class LayoutError(LiberoError):
    """No collision-free random layout was found within the attempt budget, or a start
    puts an object the goal names out of the robot's reach (a state the benchmark ships
    with the object parked metres off the table): that start cannot be built."""
