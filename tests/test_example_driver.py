"""The worked example of a third-party driver package (``examples/captain_example_driver``)
is built and installed like any other package, into a temporary folder, and its own
tests run the driver conformance kit there: every check passes. The same kit run on
deliberately broken copies of the driver fails exactly the checks each breakage
violates, so the kit can tell a broken driver from a good one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from captain_backends.testing import conformance_checks

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "captain_example_driver"

BROKEN = '''
"""Broken copies of the example driver: each must fail the check named in its class."""

import numpy as np

from captain_backends.core.driver import JointCommand
from captain_backends.testing import DriverConformance
from captain_example_driver.driver import ExampleArmDriver, ExampleArmConfig

from test_conformance import TestExampleArmConformance


class UnclippedDriver(ExampleArmDriver):
    def send_command(self, command):
        self._require_active_and_healthy()
        self.box.target = np.asarray(command.joint_positions_rad, dtype=float)
        return JointCommand(self.box.target.copy(), self.box.jaw_fraction)

    def _require_active_and_healthy(self):
        from captain_backends.core.driver import LifecycleState
        self._require(LifecycleState.ACTIVE, "send_command")
        self._raise_if_faulted()


class NeverStaleDriver(ExampleArmDriver):
    def _safety_message(self, now_s):
        latest = self.box.latest
        if latest.force_n > self.config.emergency_force_n:
            return "emergency force"
        return ""


class FaultIgnoredDriver(ExampleArmDriver):
    def _raise_if_faulted(self):
        pass


class LenientDriver(ExampleArmDriver):
    def __init__(self, **options):
        known = {k: v for k, v in options.items() if k in ExampleArmConfig.__dataclass_fields__}
        super().__init__(**known)


class TestUnclipped(TestExampleArmConformance):
    driver_name = ""
    def make_driver(self):
        return UnclippedDriver(**self.driver_options)


class TestNeverStale(TestExampleArmConformance):
    driver_name = ""
    def make_driver(self):
        return NeverStaleDriver(**self.driver_options)


class TestFaultIgnored(TestExampleArmConformance):
    driver_name = ""
    def make_driver(self):
        return FaultIgnoredDriver(**self.driver_options)


class TestLenient(TestExampleArmConformance):
    driver_name = ""
    def make_driver(self):
        return LenientDriver(**self.driver_options)
'''

#: the checks each broken copy must fail (and no others)
EXPECTED_FAILURES = {
    "TestUnclipped::test_command_clipping",
    "TestNeverStale::test_stale_state_faults",
    "TestFaultIgnored::test_fault_behaviour",
    "TestFaultIgnored::test_stale_state_faults",
    "TestLenient::test_typed_config_rejects_unknown_options",
}


def _pytest(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The example package built from a copy of its source and installed into a fresh
    folder (offline, no dependencies: captain_backends comes from this environment);
    returns the copy and an environment that sees the installed package."""
    tmp = tmp_path_factory.mktemp("example_driver")
    src = tmp / "src"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    site = tmp / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                          "--no-build-isolation", "--target", str(site), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (site / "captain_example_driver" / "example_arm.urdf").is_file()
    # the tests run against the installed package, not the copied source
    shutil.rmtree(src / "captain_example_driver")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    return src, env


def test_example_driver_is_registered_and_passes_the_conformance_kit(installed) -> None:
    src, env = installed
    probe = subprocess.run(
        [sys.executable, "-c", "from captain_backends.core.registry import available_drivers, driver_class;"
         "print(available_drivers()); print(driver_class('example_arm').__module__)"],
        env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert "'example_arm'" in probe.stdout and "captain_example_driver.driver" in probe.stdout
    out = _pytest(["tests"], src, env)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-3000:]
    passed = int(re.search(r"(\d+) passed", out.stdout).group(1))
    assert passed == len(conformance_checks()), out.stdout[-3000:]
    assert "skipped" not in out.stdout and "failed" not in out.stdout


def test_the_kit_fails_broken_copies_of_the_driver(installed) -> None:
    src, env = installed
    (src / "tests" / "test_broken.py").write_text(BROKEN)
    out = _pytest(["tests/test_broken.py"], src, env)
    failed = set(re.findall(r"^FAILED tests/test_broken\.py::(\w+::\w+)", out.stdout, re.MULTILINE))
    assert failed == EXPECTED_FAILURES, out.stdout[-6000:]
