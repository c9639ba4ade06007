"""Test tools for driver authors: the driver conformance kit.

A driver package checks its driver against the contract of
``captain_backends.core.driver`` with a few lines in its tests::

    from captain_backends.testing import DriverConformance

    class TestMyArm(DriverConformance):
        driver_name = "my_arm"            # its name in the captain.drivers entry points
        driver_options = {"port": "sim"}  # constructor options for the tests

and pytest runs every check (see ``conformance.py`` for the list and the hooks a
driver overrides to let the kit make contact, induce a fault or stop its state stream).
Needs pytest.
"""

from captain_backends.testing.conformance import DriverConformance, conformance_checks

__all__ = ["DriverConformance", "conformance_checks"]
