"""The mock driver passes the driver conformance kit (no contacts, no faults: those
checks are skipped with the reason)."""

from __future__ import annotations

from typing import Any, ClassVar

from captain_backends.testing import DriverConformance


class TestMockConformance(DriverConformance):
    driver_name = "mock"
    driver_options: ClassVar[dict[str, Any]] = {"image_size_px": 64}
