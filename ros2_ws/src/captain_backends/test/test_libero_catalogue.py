"""The LIBERO task catalogue and driver parameters (no environment is built)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from captain_backends.core.errors import BackendError
from captain_backends.core.libero import catalogue
from captain_backends.core.libero.config import LiberoConfig, describe_parameters
from captain_backends.core.libero.errors import InvalidInitStateError, UnknownSuiteError, UnknownTaskError
from captain_backends.core.params import ParameterError


def test_the_40_standard_tasks_are_listed_with_instructions():
    tasks = catalogue.standard_tasks()
    assert len(tasks) == 40
    assert [t.suite for t in tasks] == [s for s in catalogue.STANDARD_SUITES for _ in range(10)]
    assert len({t.task_id for t in tasks}) == 40
    for t in tasks:
        assert re.fullmatch(r"libero_(spatial|object|goal|10)/\d", t.task_id)
        assert len(t.instruction.split()) >= 3, t
        assert t.bddl_file.is_file() and t.init_states_file.is_file()
    # LIBERO's official instructions, in LIBERO's task order
    assert catalogue.get_task("libero_spatial/0").instruction == (
        "pick up the black bowl between the plate and the ramekin and place it on the plate")
    assert catalogue.get_task("libero_goal/7").instruction == "turn on the stove"
    assert catalogue.get_task("libero_10/9").instruction == (
        "put the yellow and white mug in the microwave and close it")
    assert catalogue.get_task("libero_object/0").problem_name == "libero_floor_manipulation"


def test_every_standard_task_has_50_official_states():
    for t in catalogue.standard_tasks():
        states = catalogue.load_init_states(t)
        assert states.shape[0] == 50 == t.num_init_states
        assert np.all(np.isfinite(states))
    held_out = catalogue.init_state("libero_spatial/3", 11)
    assert held_out.shape == catalogue.load_init_states("libero_spatial/3")[11].shape
    assert not np.array_equal(held_out, catalogue.init_state("libero_spatial/3", 12))
    training = catalogue.training_init_states("libero_spatial/3")
    assert training == tuple(i for i in range(50) if not 11 <= i <= 16)


def test_libero_pro_suites_are_selectable_by_name():
    pro = catalogue.pro_suites()
    for name in ("libero_spatial_swap", "libero_goal_lan", "libero_10_object", "libero_object_task"):
        assert name in pro
        assert len(catalogue.suite_tasks(name)) == 10
    # the language perturbation rewrites the instruction
    perturbed = catalogue.get_task("libero_goal_lan/7").instruction
    assert perturbed != catalogue.get_task("libero_goal/7").instruction
    assert not set(pro) & set(catalogue.STANDARD_SUITES)


def test_unknown_suites_tasks_and_states_name_the_valid_choices():
    with pytest.raises(UnknownSuiteError, match="libero_spatial, libero_object, libero_goal, libero_10"):
        catalogue.get_task("libero_spacial/0")
    with pytest.raises(UnknownTaskError, match=r"libero_goal/0 \.\. libero_goal/9"):
        catalogue.get_task("libero_goal/10")
    with pytest.raises(UnknownTaskError, match="<suite>/<index>"):
        catalogue.get_task("libero_goal")
    with pytest.raises(InvalidInitStateError, match=r"0\.\.49"):
        catalogue.init_state("libero_goal/1", 50)
    with pytest.raises(InvalidInitStateError):
        catalogue.init_state("libero_goal/1", -1)
    # LIBERO-PRO ships this shift variant's initial-states file empty
    with pytest.raises(InvalidInitStateError, match="holds no states"):
        catalogue.init_state("libero_object_temp_y0.5/1", 11)
    unavailable = catalogue.unavailable_suites()
    if unavailable:
        name = next(iter(unavailable))
        with pytest.raises(UnknownSuiteError, match="installed suites"):
            catalogue.suite_tasks(name)
    assert issubclass(UnknownTaskError, BackendError)


def test_driver_options_are_validated_against_the_schema():
    config = LiberoConfig.from_options(task="libero_10/3", init_state=12, control_period_s=0.02)
    assert config.substeps(0.002) == 10
    assert LiberoConfig.from_options() == LiberoConfig()
    with pytest.raises(ParameterError, match=r"known: .*init_state.*task"):
        LiberoConfig.from_options(tsk="libero_10/3")
    with pytest.raises(ParameterError, match="above its maximum"):
        LiberoConfig.from_options(layout_spread_m=2.0)
    with pytest.raises(ParameterError, match="must be bool"):
        LiberoConfig.from_options(random_layout="yes")
    with pytest.raises(ParameterError, match="multiple of the physics timestep"):
        LiberoConfig.from_options(control_period_s=0.005).substeps(0.002)
    assert "| `layout_spread_m` | float | `0.15` | m |" in describe_parameters()
