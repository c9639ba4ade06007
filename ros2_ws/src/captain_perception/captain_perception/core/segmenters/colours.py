"""Colour words mapped onto CIE L*a*b*, the perceptual colour space of the image.

Every pixel gets one basic colour name from its lightness ``L`` (0..100), chroma
``C = hypot(a, b)`` and hue angle ``h = atan2(b, a)``:

* achromatic pixels (``C < ACHROMATIC_CHROMA``): black (L < 38), grey, white (L >= 72);
* chromatic pixels by hue: red, orange, yellow, green, cyan, blue, purple, pink; warm
  hues that are dark or weakly saturated are brown, pale warm ones beige.

A colour word of a prompt accepts a set of these names (``"silver"`` accepts grey and
white, ``"golden"`` yellow, orange and brown, ...). The share of an object's pixels
whose name a word accepts is the word's evidence for that object.
"""

from __future__ import annotations

import numpy as np

BASIC_NAMES = ("black", "grey", "white", "red", "orange", "yellow", "green", "cyan", "blue", "purple",
               "pink", "brown", "beige")
ACHROMATIC_CHROMA = 12.0

#: colour word -> basic names it accepts
COLOUR_WORDS: dict[str, frozenset[str]] = {
    "black": frozenset({"black"}),
    "dark": frozenset({"black", "grey", "brown"}),
    "grey": frozenset({"grey"}),
    "gray": frozenset({"grey"}),
    "silver": frozenset({"grey", "white"}),
    "metallic": frozenset({"grey", "white"}),
    "white": frozenset({"white"}),
    "light": frozenset({"white", "beige", "grey"}),
    "red": frozenset({"red", "pink"}),
    "maroon": frozenset({"red", "brown"}),
    "orange": frozenset({"orange"}),
    "yellow": frozenset({"yellow"}),
    "golden": frozenset({"yellow", "orange", "brown"}),
    "gold": frozenset({"yellow", "orange", "brown"}),
    "green": frozenset({"green"}),
    "cyan": frozenset({"cyan", "blue"}),
    "turquoise": frozenset({"cyan", "green"}),
    "blue": frozenset({"blue", "cyan"}),
    "navy": frozenset({"blue"}),
    "purple": frozenset({"purple"}),
    "violet": frozenset({"purple"}),
    "pink": frozenset({"pink", "red"}),
    "brown": frozenset({"brown", "orange"}),
    "beige": frozenset({"beige", "white"}),
    "cream": frozenset({"beige", "white"}),
}

#: the colour of the sky, grass, ... (phrases such as "the colour of the sky")
COLOUR_PHRASES: dict[str, str] = {"sky": "blue", "grass": "green", "leaf": "green", "snow": "white",
                                  "blood": "red", "sun": "yellow", "lemon": "yellow", "chocolate": "brown",
                                  "coal": "black", "ocean": "blue", "sea": "blue", "tomato": "red"}


def name_pixels(lab: np.ndarray) -> np.ndarray:
    """Index into ``BASIC_NAMES`` of every pixel of an (..., 3) L*a*b* array."""
    lab = np.asarray(lab, dtype=np.float32)
    L, a, b = lab[..., 0], lab[..., 1], lab[..., 2]
    C = np.hypot(a, b)
    h = np.degrees(np.arctan2(b, a)) % 360.0
    idx = {n: i for i, n in enumerate(BASIC_NAMES)}
    out = np.full(L.shape, idx["grey"], np.int8)
    # chromatic by hue
    hue_names = [
        (0.0, 20.0, "pink"), (20.0, 50.0, "red"), (50.0, 75.0, "orange"), (75.0, 105.0, "yellow"),
        (105.0, 180.0, "green"), (180.0, 215.0, "cyan"), (215.0, 315.0, "blue"), (315.0, 345.0, "purple"),
        (345.0, 360.01, "pink"),
    ]
    for lo, hi, name in hue_names:
        out[(h >= lo) & (h < hi)] = idx[name]
    # reds that are dark are red, not pink
    out[(out == idx["pink"]) & (L < 55) & (C > 30)] = idx["red"]
    warm = (h >= 20.0) & (h < 115.0)
    out[warm & (h < 90.0) & (L < 45) & (C < 60)] = idx["brown"]
    out[warm & (L >= 45) & (C < 22)] = idx["beige"]
    out[warm & (L >= 45) & (L < 62) & (C < 40) & (h < 75.0)] = idx["brown"]
    achro = C < ACHROMATIC_CHROMA
    out[achro & (L < 38)] = idx["black"]
    out[achro & (L >= 38) & (L < 72)] = idx["grey"]
    out[achro & (L >= 72)] = idx["white"]
    return out


def name_shares(lab_pixels: np.ndarray) -> dict[str, float]:
    """Share of pixels carrying each basic colour name (names with a share > 0 only)."""
    names = name_pixels(lab_pixels).ravel()
    if names.size == 0:
        return {}
    counts = np.bincount(names, minlength=len(BASIC_NAMES)) / names.size
    return {BASIC_NAMES[i]: float(c) for i, c in enumerate(counts) if c > 0}


def word_share(word: str, shares: dict[str, float]) -> float:
    """Share of an object's pixels that a colour word accepts."""
    accepted = COLOUR_WORDS.get(word, frozenset())
    return float(sum(v for k, v in shares.items() if k in accepted))


def dominant_names(shares: dict[str, float], k: int = 2) -> list[str]:
    """The ``k`` most common colour names of an object."""
    return [n for n, _ in sorted(shares.items(), key=lambda kv: -kv[1])[:k]]
