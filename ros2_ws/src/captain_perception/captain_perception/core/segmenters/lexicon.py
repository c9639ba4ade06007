"""Object nouns the classical segmenter understands, with shape and size priors.

Each noun describes the outline seen from above (``round``, ``rect`` or ``any``), the
range of its largest horizontal extent (diameter or length), and the range of its
height above the surface it stands on, in metres. The ranges are generous: they
separate a plate from a bowl from a cabinet, not one brand of mug from another.

Prompts are parsed into colour words (see ``colours.py``), material words (noted but
not checked: a "wooden" cabinet may be painted black), one noun (the last known noun,
so "bowl next to the plate" names a bowl; multi-word nouns such as "cookie box" are
matched first), the remaining words, and the spatial relation the words after the noun
name (``relations.py``: "between the plate and the ramekin", "on the left", ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from captain_perception.core.segmenters.colours import COLOUR_PHRASES, COLOUR_WORDS
from captain_perception.core.segmenters.relations import Relation, parse_relation


@dataclass(frozen=True)
class NounPrior:
    """Shape and size of a kind of object.

    Attributes:
        noun: canonical noun.
        outline: ``"round"``, ``"rect"`` or ``"any"``.
        size_m: (min, max) largest horizontal extent, metres.
        height_m: (min, max) height above its support, metres.
        typical_size_m / typical_height_m: the most common values (rank candidates that
            fit the ranges equally well).
        concave: True for open containers seen from above (bowls), False for closed or
            flat-topped objects, None when either is possible.
        part_of: for parts of objects (a drawer), the whole object to segment instead.
    """

    noun: str
    outline: str
    size_m: tuple[float, float]
    height_m: tuple[float, float]
    typical_size_m: float
    typical_height_m: float
    concave: bool | None = None
    part_of: str = ""


_PRIORS = [
    NounPrior("bowl", "round", (0.095, 0.32), (0.03, 0.16), 0.15, 0.06, concave=True),
    NounPrior("plate", "round", (0.12, 0.36), (0.004, 0.045), 0.22, 0.02),
    NounPrior("ramekin", "round", (0.05, 0.10), (0.02, 0.08), 0.085, 0.045, concave=True),
    NounPrior("mug", "any", (0.06, 0.15), (0.06, 0.16), 0.1, 0.1),
    NounPrior("cup", "any", (0.04, 0.14), (0.04, 0.16), 0.08, 0.1),
    NounPrior("can", "round", (0.045, 0.11), (0.05, 0.2), 0.07, 0.11, concave=False),
    NounPrior("bottle", "round", (0.04, 0.12), (0.1, 0.4), 0.07, 0.25, concave=False),
    NounPrior("jar", "round", (0.04, 0.14), (0.05, 0.25), 0.08, 0.12),
    NounPrior("pot", "any", (0.1, 0.4), (0.05, 0.3), 0.2, 0.12),
    NounPrior("pan", "any", (0.15, 0.5), (0.02, 0.12), 0.3, 0.05),
    NounPrior("basket", "any", (0.12, 0.5), (0.05, 0.3), 0.3, 0.12, concave=True),
    NounPrior("tray", "any", (0.12, 0.6), (0.01, 0.08), 0.35, 0.03),
    NounPrior("box", "rect", (0.04, 0.45), (0.01, 0.35), 0.12, 0.06, concave=False),
    NounPrior("cookie box", "rect", (0.05, 0.16), (0.01, 0.25), 0.09, 0.03, concave=False),
    NounPrior("carton", "rect", (0.04, 0.3), (0.03, 0.3), 0.08, 0.12, concave=False),
    NounPrior("book", "rect", (0.1, 0.35), (0.01, 0.08), 0.22, 0.03, concave=False),
    NounPrior("block", "rect", (0.02, 0.12), (0.015, 0.12), 0.05, 0.05, concave=False),
    NounPrior("cube", "rect", (0.02, 0.1), (0.015, 0.1), 0.05, 0.05, concave=False),
    NounPrior("cabinet", "rect", (0.2, 1.2), (0.12, 1.2), 0.4, 0.4),
    NounPrior("drawer", "rect", (0.2, 1.2), (0.12, 1.2), 0.4, 0.4, part_of="cabinet"),
    NounPrior("stove", "rect", (0.15, 0.7), (0.005, 0.2), 0.35, 0.04),
    NounPrior("microwave", "rect", (0.25, 0.7), (0.15, 0.5), 0.45, 0.3),
    NounPrior("rack", "any", (0.1, 0.5), (0.05, 0.4), 0.25, 0.15),
    NounPrior("caddy", "rect", (0.1, 0.45), (0.04, 0.3), 0.25, 0.1),
    NounPrior("coaster", "round", (0.06, 0.16), (0.002, 0.03), 0.1, 0.01),
    NounPrior("object", "any", (0.02, 0.6), (0.005, 0.6), 0.12, 0.08),
]

PRIORS: dict[str, NounPrior] = {p.noun: p for p in _PRIORS}

#: synonyms and multi-word names -> canonical noun (multi-word keys are matched first)
ALIASES: dict[str, str] = {
    "cookie box": "cookie box", "cookies box": "cookie box", "cookies": "cookie box", "cereal box": "box",
    "cream cheese": "box",
    "butter": "box", "chocolate pudding": "box", "pudding": "box", "milk": "carton",
    "orange juice": "carton", "juice": "carton",
    "alphabet soup": "can", "tomato sauce": "can", "soup": "can", "tin": "can",
    "ketchup": "bottle", "bbq sauce": "bottle", "salad dressing": "bottle", "wine bottle": "bottle",
    "moka pot": "pot", "saucepan": "pot", "frying pan": "pan", "skillet": "pan",
    "wine rack": "rack", "dish": "plate", "saucer": "plate", "plates": "plate", "bowls": "bowl",
    "cups": "cup", "mugs": "mug", "boxes": "box", "blocks": "block", "cubes": "cube", "bin": "basket",
    "container": "basket", "burner": "stove", "cooktop": "stove", "stovetop": "stove",
    "hob": "stove", "cupboard": "cabinet", "dresser": "cabinet", "drawers": "drawer",
    "ramekins": "ramekin", "bottles": "bottle", "cans": "can", "books": "book", "thing": "object",
    "item": "object", "objects": "object",
}

MATERIAL_WORDS = frozenset({"wooden", "wood", "metal", "ceramic", "porcelain", "glass", "plastic", "steel",
                            "glazed", "paper", "cardboard"})
STOP_WORDS = frozenset({"the", "a", "an", "of", "on", "in", "to", "at", "and", "with", "that", "is", "it", "its",
                        "pick", "up", "place", "put", "from", "next", "between", "top", "bottom", "left",
                        "right", "center", "centre", "middle", "table", "colour", "color", "has", "like",
                        "which", "this", "one", "front", "back", "behind", "near", "first", "second"})


@dataclass(frozen=True)
class ParsedPrompt:
    """A prompt split into what the classical segmenter can check.

    Attributes:
        text: the prompt as given.
        colours: colour words found (including colours named by phrases: "sky" -> blue).
        materials: material words (not checked).
        noun: canonical noun, or "" when none is known.
        noun_words: the words of the prompt that named the noun.
        unknown: words that are neither colours, materials, nouns nor stop words.
        relation: the spatial relation to other objects or to the table the prompt
            names ("between the plate and the ramekin"), or None (``relations.py``).
    """

    text: str
    colours: tuple[str, ...]
    materials: tuple[str, ...]
    noun: str
    noun_words: str
    unknown: tuple[str, ...]
    relation: Relation | None = None

    @property
    def prior(self) -> NounPrior | None:
        """The noun's prior, or None."""
        return PRIORS.get(self.noun)


def parse_prompt(text: str) -> ParsedPrompt:
    """Split a prompt into colours, materials, a noun and unknown words."""
    low = re.sub(r"[^a-z ]+", " ", text.lower())
    low = re.sub(r"\s+", " ", low).strip()
    # The head noun comes before a relative clause ("bowl next to the plate", "bowl on the stove").
    head = re.split(r"\b(?:next to|between|on top of|of|on|in|inside|from|near|behind|under|beside|that|which)\b",
                    low, maxsplit=1)[0].strip() or low
    noun, noun_words = "", ""
    # longest names first, without overlaps; the last noun of the head phrase wins
    names = {**{k: k for k in PRIORS}, **ALIASES}
    taken: list[tuple[int, int, str]] = []
    for key in sorted(names, key=lambda k: -len(k)):
        for m in re.finditer(rf"\b{re.escape(key)}\b", head):
            if all(m.end() <= a or m.start() >= b for a, b, _ in taken):
                taken.append((m.start(), m.end(), key))
    noun_start, noun_end = 0, 0
    if taken:
        noun_start, noun_end, key = max(taken)
        noun, noun_words = names[key], key
    colours: list[str] = []
    materials: list[str] = []
    unknown: list[str] = []
    consumed = set(noun_words.split())
    for word in head.split():
        if word in COLOUR_WORDS:
            colours.append(word)
        elif word in COLOUR_PHRASES:
            colours.append(COLOUR_PHRASES[word])
        elif word in MATERIAL_WORDS:
            materials.append(word)
        elif word in consumed or word in STOP_WORDS:
            continue
        else:
            unknown.append(word)
    for m in re.finditer(r"colou?r of (?:the |a |an )?([a-z]+)", low):
        word = m.group(1)
        colour = COLOUR_PHRASES.get(word, word if word in COLOUR_WORDS else "")
        if colour:
            colours.append(colour)
    # a multi-word alias such as "orange juice" is a noun, not a colour
    colours = [c for c in colours if c not in consumed]
    relation = parse_relation(low[noun_end:].strip(), low[:noun_start].strip()) if noun else None
    return ParsedPrompt(text=text, colours=tuple(dict.fromkeys(colours)), materials=tuple(materials),
                        noun=noun, noun_words=noun_words, unknown=tuple(unknown), relation=relation)
