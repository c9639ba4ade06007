"""Result dicts and receipts follow the fixed shapes of the policy API."""

from __future__ import annotations

import json
import math

import numpy as np

from captain_harness.core.results import (
    MAX_RECEIPT_CHARS,
    RESULT_KEYS,
    FailureCategory,
    fail,
    fmt_number,
    format_receipt,
    ok,
)


def test_result_has_exactly_the_fixed_keys_and_is_json() -> None:
    r = ok({"p": np.array([1.0, 2.0]), "n": np.int64(3), "b": np.bool_(True), "bad": float("nan")},
           executed=True)
    assert tuple(r) == RESULT_KEYS
    assert r["failure_category"] is None
    assert r["value"] == {"p": [1.0, 2.0], "n": 3, "b": True, "bad": None}
    json.dumps(r, allow_nan=False)


def test_failure_carries_category_value() -> None:
    r = fail(FailureCategory.IK_FAILED, "no solution at waypoint 3; move the target closer")
    assert r["success"] is False and r["failure_category"] == "ik_failed"
    assert "closer" in r["message"]


def test_receipt_number_style_matches_published_episodes() -> None:
    assert fmt_number(0.16812) == "0.1681"
    assert fmt_number(5.1981) == "5.198"
    assert fmt_number(112.13) == "112.1"
    assert fmt_number(math.inf) == "nan"
    line = format_receipt("move_to", ok(), [("stopped_reason", "target_reached"),
                                            ("executed_distance_m", 0.16812),
                                            ("max_observed_force_n", 5.1981)])
    assert line == "move_to: ok; stopped_reason=target_reached executed_distance_m=0.1681 max_observed_force_n=5.198"
    assert format_receipt("move_to", ok(), [("gripper_open_fraction", (0.043541, 0.99041))]) == \
        "move_to: ok; gripper_open_fraction=0.04354->0.9904"
    assert format_receipt("hold", ok()) == "hold: ok"
    failed = fail(FailureCategory.CONTROLLER_REJECTED, "emergency force limit")
    assert format_receipt("move_to", failed, [("max_observed_force_n", 112.13)], notes=["emergency_limit"]) == \
        "move_to: FAILED controller_rejected; emergency_limit; max_observed_force_n=112.1"


def test_receipt_is_capped() -> None:
    line = format_receipt("observe", ok(), [("k" * 50, "v" * 400)])
    assert len(line) == MAX_RECEIPT_CHARS and line.endswith("...")
