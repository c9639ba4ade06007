"""Exceptions of the XR1 driver. All derive from the backends' ``BackendError``; safety
stops raise the shared ``DriverFault``."""

from __future__ import annotations

from captain_backends.core.errors import BackendError


class XR1ConfigError(BackendError):
    """The XR1 configuration is missing a value, has the wrong type or is out of range."""


class XR1ConnectionError(BackendError):
    """The robot's topics did not deliver what the driver needs (e.g. no joint state)."""


class CameraUnavailableError(BackendError):
    """A camera has not delivered a fresh, consistent RGB + depth + camera_info set."""
