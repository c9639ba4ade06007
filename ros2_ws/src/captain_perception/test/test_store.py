"""Observation handles and detection ids: issue, look-up, stale and unknown."""

from __future__ import annotations

import numpy as np
import pytest

from captain_backends.core.driver import CameraFrame
from captain_perception.core.errors import InvalidPerceptionArgument, StaleHandleError, UnknownHandleError
from captain_perception.core.store import MaskCrop, PerceptionStore


def _frame() -> CameraFrame:
    return CameraFrame("agentview", np.zeros((8, 8, 3), np.uint8), np.ones((8, 8), np.float32), np.eye(3),
                       np.eye(4), 0.0)


def test_handles_go_stale_after_the_limit():
    store = PerceptionStore(max_observations=2)
    a = store.add_observation({"agentview": _frame()}, {}, {})
    b = store.add_observation({"agentview": _frame()}, {}, {})
    det = store.add_detection(a, "agentview", "mark_point", "", (1, 1), np.zeros(3))
    assert store.detection(det.detection_id) is det
    store.add_observation({"agentview": _frame()}, {}, {})
    with pytest.raises(StaleHandleError, match="last 2"):
        store.observation(a.handle)
    with pytest.raises(StaleHandleError, match="no longer kept"):
        store.detection(det.detection_id)
    assert store.observation(b.handle) is b
    assert store.observation({"value": {"observation_handle": b.handle}}) is b


def test_unknown_and_malformed_handles():
    store = PerceptionStore()
    with pytest.raises(UnknownHandleError, match="call observe"):
        store.observation("obs_0")
    with pytest.raises(UnknownHandleError, match="not an observation handle"):
        store.observation("banana")
    with pytest.raises(InvalidPerceptionArgument):
        store.observation(3)
    with pytest.raises(UnknownHandleError, match="mark_point"):
        store.detection("det_7")


def test_mask_crop_round_trip():
    m = np.zeros((20, 30), bool)
    m[5:9, 10:20] = True
    c = MaskCrop.from_mask(m)
    assert c.area_px == 40 and c.bbox_px == (10, 5, 20, 9)
    assert np.array_equal(c.full(), m)
