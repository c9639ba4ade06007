"""Text grounding with spatial relations: prompt parsing, and the classical segmenter on
rendered libero_spatial scenes (two identical black bowls; only the words after the noun
tell them apart) scored against the simulator's segmentation."""

from __future__ import annotations

import numpy as np
import pytest

from captain_backends.core.driver import HEAD_CAMERA
from captain_perception.core.segmenters.lexicon import parse_prompt
from captain_perception.core.segmenters.relations import Place, binary_fit, extreme_fit


@pytest.mark.parametrize(("text", "kind", "refs"), [
    ("black bowl between the plate and the ramekin", "between", ("plate", "ramekin")),
    ("the black bowl next to the cookie box", "near", ("cookie box",)),
    ("black bowl from table center", "table_centre", ()),
    ("black bowl on the cookie box", "on", ("cookie box",)),
    ("black bowl in the top drawer of the wooden cabinet", "in", ("top drawer of the wooden cabinet",)),
    ("bowl to the left of the plate", "left_of", ("plate",)),
    ("bowl in front of the ramekin", "front_of", ("ramekin",)),
    ("bowl behind the plate", "behind", ("plate",)),
    ("the bowl on the right", "rightmost", ()),
    ("left black bowl", "leftmost", ()),
    ("black bowl", None, ()),
])
def test_relation_parsing(text, kind, refs):
    p = parse_prompt(text)
    assert p.noun == "bowl" and (p.relation.kind if p.relation else None) == kind
    if p.relation:
        assert p.relation.refs == refs


def _place(x, y, top=0.06, h=0.05, size=0.12):
    return Place(np.array([x, y]), top, top - h, size)


def test_relation_fits_prefer_the_object_that_stands_so():
    right, away = np.array([0.0, -1.0]), np.array([1.0, 0.0])
    plate, ramekin = _place(0.6, 0.2, 0.02, 0.02, 0.2), _place(0.6, -0.2, 0.05, 0.05, 0.08)
    middle, aside = _place(0.6, 0.0), _place(0.3, 0.3)
    assert binary_fit("between", middle, [plate, ramekin], right, away) > 0.9
    assert binary_fit("between", aside, [plate, ramekin], right, away) < 0.01
    assert binary_fit("near", _place(0.6, -0.05), [ramekin], right, away) > binary_fit("near", aside, [ramekin],
                                                                                       right, away)
    on_plate = _place(0.6, 0.21, 0.07, 0.05)
    assert binary_fit("on", on_plate, [plate], right, away) > 0.9 > binary_fit("on", aside, [plate], right, away)
    assert binary_fit("left_of", plate_left := _place(0.6, 0.5), [plate], right, away) > 0.9
    assert binary_fit("right_of", plate_left, [plate], right, away) < 0.1
    assert binary_fit("behind", _place(0.8, 0.2), [plate], right, away) > 0.9
    assert extreme_fit("leftmost", plate_left, [plate_left, middle], right, away) == 1.0


@pytest.mark.sim
@pytest.mark.slow
def test_libero_spatial_instructions_pick_the_right_one_of_two_bowls(tmp_path):
    from captain_perception import grounding_score as gs
    from captain_perception.scenes import SceneSpec, load_or_render

    specs = (SceneSpec("libero_spatial/0", 11), SceneSpec("libero_spatial/1", 12), SceneSpec("libero_spatial/6", 11),
             SceneSpec("libero_spatial/5", 11))  # 5: the bowl on the ramekin, which it hides
    records = load_or_render(specs, tmp_path)
    scores = [s for r in records for s in gs.score_record(r)]
    bowls = [s for s in scores if s.relational]
    assert len(bowls) == 4 and all(s.target == "akita_black_bowl_1" for s in bowls)
    assert all(s.correct for s in scores), gs.table(scores)
    # without the relation, the same words pick a bowl for no reason: the other one at least once
    from captain_perception.core.primitives import Perception

    wrong_without = 0
    for r in records:
        p = Perception(gs._ReplayDriver(r), tmp_path / r.spec.key,
                       robot_state=lambda: {"end_effector_position_m": None})
        h = p.observe().result["value"]["observation_handle"]
        res = p.segment(h, HEAD_CAMERA, "black bowl").result
        best = p.store.detection(res["value"]["detection_id"]).mask.full()
        wrong_without += int((best & r.object_mask(HEAD_CAMERA, "akita_black_bowl_1")).sum() < 0.5 * best.sum())
        # left and right as the camera sees them: the bowl whose true centre projects further left
        uv = {}
        for name in ("akita_black_bowl_1", "akita_black_bowl_2"):
            _, xs = np.nonzero(r.object_mask(HEAD_CAMERA, name))
            uv[name] = xs.mean()
        for word, pick in (("left", min), ("right", max)):
            res = p.segment(h, HEAD_CAMERA, f"the black bowl on the {word}").result
            best = p.store.detection(res["value"]["detection_id"]).mask.full()
            want = pick(uv, key=uv.get)
            assert (best & r.object_mask(HEAD_CAMERA, want)).sum() > 0.5 * best.sum(), (r.spec.key, word)
        p.close()
    assert wrong_without >= 1
