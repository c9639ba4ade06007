"""Prompt parsing, colour naming and the SAM 3 loader's failure paths."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from captain_perception.core.errors import BackendUnavailableError, InvalidPerceptionArgument
from captain_perception.core.segmenters import Sam3Segmenter, make_segmenter
from captain_perception.core.segmenters.colours import name_shares, word_share
from captain_perception.core.segmenters.lexicon import parse_prompt


@pytest.mark.parametrize(("text", "noun", "colours"), [
    ("black bowl", "bowl", ("black",)),
    ("the black bowl next to the cookie box", "bowl", ("black",)),
    ("cookie box", "cookie box", ()),
    ("top drawer of the wooden cabinet", "drawer", ()),
    ("wooden cabinet", "cabinet", ()),
    ("orange juice", "carton", ()),
    ("the cube that has the colour of the sky", "cube", ("blue",)),
    ("red mug", "mug", ("red",)),
])
def test_prompt_parsing(text, noun, colours):
    p = parse_prompt(text)
    assert p.noun == noun
    assert p.colours == colours


def _lab(rgb: tuple[int, int, int]) -> np.ndarray:
    px = np.array([[rgb]], np.float32) / 255.0
    return cv2.cvtColor(px, cv2.COLOR_RGB2Lab).reshape(1, 3)


@pytest.mark.parametrize(("rgb", "word"), [
    ((200, 30, 25), "red"), ((30, 60, 200), "blue"), ((40, 160, 50), "green"), ((230, 210, 40), "yellow"),
    ((20, 20, 22), "black"), ((240, 240, 240), "white"), ((120, 120, 120), "grey"), ((110, 70, 35), "brown"),
    ((120, 120, 120), "silver"), ((230, 120, 20), "orange"),
])
def test_colour_words_accept_their_colours(rgb, word):
    assert word_share(word, name_shares(_lab(rgb))) == 1.0


def test_colour_words_reject_other_colours():
    assert word_share("red", name_shares(_lab((30, 60, 200)))) == 0.0
    assert word_share("black", name_shares(_lab((240, 240, 240)))) == 0.0


def test_unknown_segmenter_lists_the_valid_ones():
    with pytest.raises(InvalidPerceptionArgument, match="classical, sam3"):
        make_segmenter("yolo")


def test_sam3_failure_paths(tmp_path):
    with pytest.raises(BackendUnavailableError, match="not configured"):
        Sam3Segmenter().load()
    with pytest.raises(BackendUnavailableError, match="does not exist"):
        Sam3Segmenter(tmp_path / "missing").load()
    with pytest.raises(BackendUnavailableError, match="has no checkpoint"):
        Sam3Segmenter(tmp_path).load()
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "sam2"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(BackendUnavailableError, match="not 'sam3'"):
        Sam3Segmenter(tmp_path).load()
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "sam3"}))
    with pytest.raises(BackendUnavailableError, match="cannot load SAM 3"):
        Sam3Segmenter(tmp_path).load()
