"""Exceptions of the backends core. Every one derives from ``BackendError``."""

from __future__ import annotations


class BackendError(Exception):
    """Base of every error raised by a driver or the driver registry."""


class DriverStateError(BackendError):
    """A call was made in the wrong lifecycle state (e.g. a command while INACTIVE)."""


class UnknownDriverError(BackendError):
    """No driver is registered under the requested name."""


class DriverFault(BackendError):
    """The driver stopped commanding because of a safety condition."""


class CommandError(BackendError):
    """A malformed command (wrong shape, NaN) was given to a driver."""
