"""The episode backend and the harness host choose drivers through the entry-point
registry only, and pass every option a caller names on to the driver, which refuses an
unknown one (a typo never passes unnoticed)."""

from __future__ import annotations

import pytest

from captain_backends.core.config import DriverConfigError
from captain_harness.core.episode.backend import BackendRequest, default_backend, driver_for_task
from captain_harness.core.episode.errors import EpisodeError
from captain_harness.core.host.robot_host import HostSettings, RobotHost, _construct


def test_driver_for_task_comes_from_the_registry() -> None:
    assert driver_for_task("libero_object/2") == ("libero", {"task": "libero_object/2"})
    assert driver_for_task("tabletop/stack_cubes") == ("tabletop", {"task": "stack_cubes"})
    with pytest.raises(EpisodeError, match="must look like <suite>/<task>"):
        driver_for_task("libero_object")


def test_default_backend_refuses_an_unknown_driver_option(tmp_path) -> None:
    request = BackendRequest("mock/empty", -1, None, tmp_path, str(tmp_path), "e")
    with pytest.raises(DriverConfigError, match=r"unknown option\(s\) 'image_sise_px' of driver 'mock'; "
                                                r"valid options: image_size_px, cache_dir"):
        default_backend(request, driver_options={"image_sise_px": 64})
    backend = default_backend(request, driver_options={"image_size_px": 64})
    try:
        assert backend.driver.config.image_size_px == 64
        assert backend.driver.capture()["agentview"].rgb.shape == (64, 64, 3)
    finally:
        backend.close()


def test_host_passes_the_users_driver_options_unfiltered() -> None:
    with pytest.raises(DriverConfigError, match=r"unknown option.*'settle_time'.*valid options: task, seed"):
        _construct("tabletop", {"task": "pick_cube", "init_state": 2}, {"settle_time": 0.1})
    # the episode's own options go where the driver declares them (tabletop has no init_state)
    driver = _construct("tabletop", {"task": "pick_cube", "init_state": 2, "seed": 4}, {"image_size_px": 32})
    assert (driver.config.task, driver.config.seed, driver.config.image_size_px) == ("pick_cube", 4, 32)
    host = RobotHost(HostSettings(driver="mock", image_size_px=48, driver_config_path="/nonexistent.yaml"))
    options, extra = host._driver_options("mock", "cube_on_plate", 3, -1)
    # the config file goes only to drivers that take one (xr1), the image size to those that declare it
    assert extra == {"image_size_px": 48}
    # the episode's task and start state are offered; the mock declares neither (one scene)
    assert options == {"task": "cube_on_plate", "init_state": 3}
    assert _construct("mock", options, extra).config.image_size_px == 48
    options, extra = RobotHost(HostSettings(driver="xr1", namespace="/robots/xr1",
                                            driver_config_path="/x.yaml"))._driver_options("xr1", "", -1, -1)
    assert extra == {"config": "/x.yaml", "namespace": "robots/xr1"}
