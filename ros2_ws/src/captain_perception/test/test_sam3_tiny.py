"""The SAM 3 segmenter's transformers path, run for real on a tiny random checkpoint.

The checkpoint (``_tiny_sam3``) is built offline in a temporary folder; the frame is a
real render of the MuJoCo tabletop scene, cropped to a non-square size so that a
height/width mix-up shows. Random weights give meaningless masks, so the tests check
plumbing: loading, shapes, ranges, ordering, agreement with the model's raw outputs,
preprocessing and the failure messages.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from _tiny_sam3 import IMAGE_MEAN, IMAGE_SIZE_PX, IMAGE_STD, NUM_QUERIES, build_tiny_sam3

from captain_perception.core.errors import BackendUnavailableError, NothingFoundError
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.segmenters import Sam3Segmenter

pytestmark = pytest.mark.sim

#: rows kept of the 512 x 512 head-camera render (a 400 x 512 frame)
CROP_ROWS = (56, 456)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_tiny_sam3(tmp_path_factory.mktemp("sam3") / "tiny")


@pytest.fixture(scope="module")
def cloud():
    from captain_backends.core.driver import HEAD_CAMERA
    from captain_backends.core.tabletop.driver import TabletopDriver

    driver = TabletopDriver(task="cube_on_plate", seed=0)
    driver.configure()
    try:
        frame = driver.capture((HEAD_CAMERA,))[HEAD_CAMERA]
    finally:
        driver.shutdown()
    r0, r1 = CROP_ROWS
    K = np.array(frame.K, dtype=float)
    K[1, 2] -= r0
    frame = replace(frame, rgb=np.ascontiguousarray(frame.rgb[r0:r1]),
                    depth_m=np.ascontiguousarray(frame.depth_m[r0:r1]), K=K)
    return FrameCloud(frame)


@pytest.fixture(scope="module")
def segmenter(checkpoint):
    seg = Sam3Segmenter(checkpoint, score_threshold=0.0)
    seg.load()
    return seg


def test_loads_through_transformers(segmenter, checkpoint):
    import torch

    assert torch.is_grad_enabled(), "loading must not switch autograd off for the caller"
    info = segmenter.describe()
    assert info["loader"] == "transformers"
    assert info["weights"] == str(checkpoint) and info["backend"] == "sam3"
    assert segmenter.input_size_hw == (IMAGE_SIZE_PX, IMAGE_SIZE_PX)


def test_segment_returns_frame_sized_masks(segmenter, cloud):
    h, w = cloud.frame.rgb.shape[:2]
    assert (h, w) == (CROP_ROWS[1] - CROP_ROWS[0], 512)
    segments = segmenter.segment(cloud, "red cube", max_results=NUM_QUERIES)
    assert 1 <= len(segments) <= NUM_QUERIES
    scores = [s.score for s in segments]
    assert scores == sorted(scores, reverse=True)
    for seg in segments:
        assert seg.mask.shape == (h, w) and seg.mask.dtype == bool and seg.mask.any()
        assert 0.0 <= seg.score <= 1.0
        assert seg.label == "red cube" and seg.evidence["backend"] == "sam3"
    assert len(segmenter.segment(cloud, "red cube", max_results=2)) <= 2


def test_segments_agree_with_the_raw_model_outputs(segmenter, checkpoint, cloud):
    """Scores are sigmoid(logit) x sigmoid(presence) of a direct forward pass, and each
    frame-sized mask, shrunk to the model's mask grid, matches that query's mask logits."""
    import torch
    from torch.nn import functional
    from transformers import AutoTokenizer, Sam3Model

    model = Sam3Model.from_pretrained(str(checkpoint), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint), local_files_only=True)
    tokens = tokenizer(["blue block"], return_tensors="pt", padding="max_length", max_length=32)
    with torch.no_grad():
        out = model(pixel_values=segmenter.preprocess(cloud.frame.rgb), input_ids=tokens["input_ids"],
                    attention_mask=tokens["attention_mask"])
    raw = (out.pred_logits[0].sigmoid() * out.presence_logits[0].sigmoid()).numpy()
    low = out.pred_masks[0].numpy() > 0.0  # probability > 0.5 on the model's mask grid
    segments = segmenter.segment(cloud, "blue block", max_results=NUM_QUERIES)
    queries = [int(np.argmin(np.abs(raw - seg.score))) for seg in segments]
    assert segments and len(set(queries)) == len(queries)
    assert set(queries) <= set(np.flatnonzero(low.any(axis=(1, 2))))
    for seg, q in zip(segments, queries, strict=True):
        assert abs(raw[q] - seg.score) < 1e-5
        shrunk = functional.interpolate(torch.from_numpy(seg.mask)[None, None].float(), size=low.shape[1:],
                                        mode="area")[0, 0].numpy() > 0.5
        assert (shrunk == low[q]).mean() > 0.9


def test_thresholds_that_exclude_everything_say_why(checkpoint, cloud):
    with pytest.raises(NothingFoundError, match=r"found no 'red cube' in agentview \(best score 0\.\d\d < 1\.01\)"):
        Sam3Segmenter(checkpoint, score_threshold=1.01).segment(cloud, "red cube")
    no_pixel = rf"{NUM_QUERIES} instance\(s\) scored >= 0\.0 but no mask pixel has probability > 1\.0"
    with pytest.raises(NothingFoundError, match=no_pixel):
        Sam3Segmenter(checkpoint, score_threshold=0.0, mask_threshold=1.0).segment(cloud, "red cube")


def test_preprocessing_follows_the_checkpoint(segmenter, checkpoint, cloud, tmp_path):
    meta = json.loads((checkpoint / "preprocessor_config.json").read_text())
    mean, std = np.array(meta["image_mean"]), np.array(meta["image_std"])
    assert tuple(mean) == IMAGE_MEAN and tuple(std) == IMAGE_STD
    size = (meta["size"]["height"], meta["size"]["width"])
    flat = np.empty((48, 80, 3), np.uint8)
    flat[:] = (200, 100, 30)
    x = segmenter.preprocess(flat).cpu().numpy()
    assert x.shape == (1, 3, *size) and x.dtype == np.float32
    expected = (np.array([200, 100, 30]) / 255.0 - mean) / std
    np.testing.assert_allclose(x[0].reshape(3, -1), np.repeat(expected[:, None], x[0, 0].size, 1), atol=1e-5)
    # a real frame: resizing keeps each channel's mean, normalisation maps it like a flat colour
    rgb = cloud.frame.rgb
    y = segmenter.preprocess(rgb).cpu().numpy()[0]
    np.testing.assert_allclose(y.reshape(3, -1).mean(1), (rgb.reshape(-1, 3).mean(0) / 255.0 - mean) / std,
                               atol=0.03)
    # without preprocessor_config.json: the backbone's image size and the 0.5 / 0.5 normalisation
    bare = tmp_path / "bare"
    shutil.copytree(checkpoint, bare)
    (bare / "preprocessor_config.json").unlink()
    seg = Sam3Segmenter(bare)
    seg.load()
    z = seg.preprocess(flat).cpu().numpy()
    assert z.shape == (1, 3, IMAGE_SIZE_PX, IMAGE_SIZE_PX)
    np.testing.assert_allclose(z[0, :, 0, 0], (np.array([200, 100, 30]) / 255.0 - 0.5) / 0.5, atol=1e-5)


def test_published_video_layout_and_bfloat16_weights_load(checkpoint, cloud, tmp_path, segmenter):
    reference = {round(s.score, 5) for s in segmenter.segment(cloud, "plate", max_results=NUM_QUERIES)}
    video = Sam3Segmenter(build_tiny_sam3(tmp_path / "video", video_layout=True), score_threshold=0.0)
    assert {round(s.score, 5) for s in video.segment(cloud, "plate", max_results=NUM_QUERIES)} == reference
    assert video.describe()["loader"] == "transformers"
    half = Sam3Segmenter(build_tiny_sam3(tmp_path / "bf16", dtype="bfloat16"), score_threshold=0.0)
    segments = half.segment(cloud, "plate", max_results=NUM_QUERIES)
    assert segments and all(s.mask.shape == cloud.frame.rgb.shape[:2] and 0 <= s.score <= 1 for s in segments)


def test_unusable_folders_are_reported(checkpoint, tmp_path):
    wrong = tmp_path / "wrong"
    shutil.copytree(checkpoint, wrong)
    cfg = json.loads((wrong / "config.json").read_text())
    (wrong / "config.json").write_text(json.dumps({**cfg, "model_type": "sam2"}))
    with pytest.raises(BackendUnavailableError, match=r"'sam2' model, not 'sam3' or 'sam3_video'"):
        Sam3Segmenter(wrong).load()
    no_weights = tmp_path / "no_weights"
    shutil.copytree(checkpoint, no_weights)
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(BackendUnavailableError, match=r"has no checkpoint: expected config.json with \*.safetensors"):
        Sam3Segmenter(no_weights).load()
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(BackendUnavailableError, match=r"cannot load SAM 3 from .*broken: transformers: "):
        Sam3Segmenter(broken).load()
