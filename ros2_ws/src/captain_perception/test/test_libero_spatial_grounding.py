"""The classical segmenter on the 10 libero_spatial tasks in their official state 11.

Every object named in a task's instruction is either grounded (the best detection is
that object, or for "black bowl" one of the two bowls) or reported not found with a
reason; a confident wrong answer fails the test.
"""

from __future__ import annotations

import pytest

from captain_backends.core.driver import HEAD_CAMERA
from captain_harness.core.api import RobotAPI
from captain_perception.core.primitives import Perception

pytestmark = [pytest.mark.sim, pytest.mark.slow]

#: prompt -> objects it may name (LIBERO entity names)
PROMPTS = {
    "black bowl": {"akita_black_bowl_1", "akita_black_bowl_2"},
    "plate": {"plate_1"},
    "ramekin": {"glazed_rim_porcelain_ramekin_1"},
    "cookie box": {"cookies_1"},
    "wooden cabinet": {"wooden_cabinet_1"},
    "top drawer of the wooden cabinet": {"wooden_cabinet_1"},
    "stove": {"flat_stove_1"},
}
#: which prompts each task's instruction names
TASK_PROMPTS = {
    0: ["black bowl", "plate", "ramekin"], 1: ["black bowl", "ramekin", "plate"], 2: ["black bowl", "plate"],
    3: ["black bowl", "cookie box", "plate"], 4: ["black bowl", "top drawer of the wooden cabinet", "plate"],
    5: ["black bowl", "ramekin", "plate"], 6: ["black bowl", "cookie box", "plate"],
    7: ["black bowl", "stove", "plate"], 8: ["black bowl", "plate"], 9: ["black bowl", "wooden cabinet", "plate"],
}


def test_instruction_objects_are_grounded_or_honestly_refused(tmp_path):
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception.groundtruth import SimTruth

    driver = LiberoDriver(task="libero_spatial/0", init_state=11)
    driver.configure()
    grounded, refused, wrong = [], [], []
    try:
        for task, prompts in TASK_PROMPTS.items():
            info = driver.load_task(f"libero_spatial/{task}", init_state=11)
            for prompt in prompts:
                assert prompt.split()[-1] in info.instruction or prompt in ("stove", "cookie box")
            truth = SimTruth.from_libero(driver, include_fixtures=True)
            perception = Perception(driver, tmp_path / str(task))
            api = RobotAPI()
            api.register_object(perception)
            handle = api.call("observe").result["value"]["observation_handle"]
            seg = truth.segmentation(HEAD_CAMERA)
            for prompt in prompts:
                out = api.call("segment", (handle, HEAD_CAMERA, prompt)).result
                if not out["success"]:
                    assert out["failure_category"] == "not_found" and out["message"]
                    refused.append((task, prompt))
                    continue
                best = perception.store.detection(out["value"]["detection_id"]).mask.full()
                ious = {n: (best & truth.object_mask(seg, n)).sum() / max(1, (best | truth.object_mask(seg, n)).sum())
                        for n in truth.objects}
                name = max(ious, key=ious.get)
                (grounded if name in PROMPTS[prompt] and ious[name] > 0.5 else wrong).append((task, prompt, name))
            truth.close()
    finally:
        driver.shutdown()
    assert not wrong, f"confidently wrong: {wrong}"
    print(f"grounded {len(grounded)}, refused {len(refused)}: {refused}")
    # the drawer is a part and is refused by design; everything else should mostly ground
    others = [r for r in refused if r[1] != "top drawer of the wooden cabinet"]
    assert len(grounded) >= 0.9 * (len(grounded) + len(others)), (grounded, refused)
