"""Self-collision checking of the arm with coal, on the description's own collision geometry.

The collision geometry is read from the same model file as the kinematics
(``pinocchio.buildGeomFromMJCF`` / ``buildGeomFromUrdf``), the fingers are locked like in
``Kinematics`` and every mesh is replaced by its convex hull (conservative, and an order
of magnitude faster than mesh-mesh tests). Pairs that can never matter are disabled:

* pairs on the same body or on bodies joined by one joint (adjacent links), always;
* the ``<disable_collisions>`` pairs of an SRDF: ``RobotDescription.srdf_path`` when set,
  else the SRDF shipped for the robot's name in ``captain_harness/core/robots/``.
  Link names match exactly or as the suffix after a prefix (``link3`` matches
  ``robot0_link3``), so one SRDF serves the differently prefixed copies of a robot.

``suggest_disabled_pairs`` computes such a list (adjacent, colliding at home, never
colliding over random configurations) and ``write_srdf`` saves it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import coal
import numpy as np
import pinocchio as pin

from captain_harness.core.kinematics import Kinematics, KinematicsError

ROBOTS_DIR = Path(__file__).resolve().parent / "robots"


@dataclass(frozen=True)
class DisabledPair:
    """Two links whose collision is not checked, and why (SRDF ``reason``)."""

    link1: str
    link2: str
    reason: str


def shipped_srdf(robot_name: str) -> Path | None:
    """The SRDF shipped with the harness for ``robot_name``, if any."""
    path = ROBOTS_DIR / f"{robot_name}.srdf"
    return path if path.is_file() else None


def read_srdf_pairs(path: Path) -> list[DisabledPair]:
    """The ``<disable_collisions>`` entries of an SRDF file."""
    root = ET.parse(path).getroot()
    return [
        DisabledPair(e.get("link1", ""), e.get("link2", ""), e.get("reason", ""))
        for e in root.iter("disable_collisions")
    ]


def write_srdf(path: Path, robot_name: str, pairs: Iterable[DisabledPair], comment: str = "") -> None:
    """Write an SRDF holding only ``<disable_collisions>`` entries."""
    lines = ['<?xml version="1.0" ?>', f'<robot name="{robot_name}">']
    if comment:
        lines.append(f"  <!-- {comment} -->")
    for p in pairs:
        lines.append(f'  <disable_collisions link1="{p.link1}" link2="{p.link2}" reason="{p.reason}"/>')
    lines.append("</robot>")
    Path(path).write_text("\n".join(lines) + "\n")


def _match_link(srdf_name: str, body_names: Iterable[str]) -> str | None:
    names = list(body_names)
    if srdf_name in names:
        return srdf_name
    hits = [n for n in names if n.endswith("_" + srdf_name)]
    return hits[0] if len(hits) == 1 else None


class SelfCollisionChecker:
    """Checks arm configurations (rad, command order) for self-collision.

    Attributes:
        geom_model / geom_data: the Pinocchio geometry with the active collision pairs.
        disabled: the pairs removed (adjacent links and SRDF entries actually applied).
        srdf_path: the SRDF that was applied, or None.
    """

    def __init__(
        self,
        kin: Kinematics,
        *,
        srdf_path: Path | None = None,
        convex_hulls: bool = True,
        apply_srdf: bool = True,
    ) -> None:
        desc = kin.description
        self.kin = kin
        path = str(desc.model_path)
        fmt = desc.model_format.lower()
        if fmt == "mjcf":
            geom = pin.buildGeomFromMJCF(kin.full_model, path, pin.GeometryType.COLLISION)
        else:
            geom = pin.buildGeomFromUrdf(
                kin.full_model, path, pin.GeometryType.COLLISION, package_dirs=[str(Path(path).parent)]
            )
        if kin.locked_joint_ids:
            model, geom = pin.buildReducedModel(kin.full_model, geom, kin.locked_joint_ids, kin.locked_reference_q)
        else:
            model = kin.full_model
        if geom.ngeoms == 0:
            raise KinematicsError(f"{path} has no collision geometry; self-collision cannot be checked")
        if convex_hulls:
            for go in geom.geometryObjects:
                g = go.geometry
                if isinstance(g, coal.BVHModelBase):
                    g.buildConvexRepresentation(False)
                    go.geometry = g.convex
        self.model = model
        self.data = model.createData()
        self._joint_index = np.array([model.joints[model.getJointId(n)].idx_q for n in kin.joint_names])
        self._identity_order = bool(np.all(self._joint_index == np.arange(kin.nq)))
        self.body_of = [model.frames[go.parentFrame].name for go in geom.geometryObjects]
        geom.addAllCollisionPairs()
        disabled: list[DisabledPair] = []
        for i, j in self._adjacent_geometry_pairs(model, geom):
            disabled.append(DisabledPair(self.body_of[i], self.body_of[j], "Adjacent"))
        self.srdf_path: Path | None = None
        srdf = srdf_path or desc.srdf_path or shipped_srdf(desc.name)
        if apply_srdf and srdf is not None and Path(srdf).is_file():
            self.srdf_path = Path(srdf)
            bodies = set(self.body_of)
            for p in read_srdf_pairs(Path(srdf)):
                a, b = _match_link(p.link1, bodies), _match_link(p.link2, bodies)
                if a is not None and b is not None:
                    disabled.append(DisabledPair(a, b, p.reason))
        disabled_set = {frozenset((p.link1, p.link2)) for p in disabled}
        all_pairs = [(int(cp.first), int(cp.second)) for cp in geom.collisionPairs]
        keep = [
            (i, j)
            for i, j in all_pairs
            if frozenset((self.body_of[i], self.body_of[j])) not in disabled_set and self.body_of[i] != self.body_of[j]
        ]
        geom.removeAllCollisionPairs()
        for i, j in keep:
            geom.addCollisionPair(pin.CollisionPair(i, j))
        self.disabled = disabled
        self.geom_model = geom
        self.geom_data = pin.GeometryData(geom)
        self._pairs = keep

    @staticmethod
    def _adjacent_geometry_pairs(model: pin.Model, geom: pin.GeometryModel) -> list[tuple[int, int]]:
        """Geometry index pairs on the same joint or on a parent/child joint pair.

        Links without geometry are skipped over (the hand counts as adjacent to the last
        link that has geometry before it)."""
        joints_with_geom = {go.parentJoint for go in geom.geometryObjects}

        def geom_parent(j: int) -> int:
            p = model.parents[j]
            while p > 0 and p not in joints_with_geom:
                p = model.parents[p]
            return p

        out = []
        objs = geom.geometryObjects
        for i in range(len(objs)):
            for j in range(i + 1, len(objs)):
                a, b = objs[i].parentJoint, objs[j].parentJoint
                if a == b or geom_parent(a) == b or geom_parent(b) == a:
                    out.append((i, j))
        return out

    @property
    def active_pair_count(self) -> int:
        """Number of collision pairs checked per configuration."""
        return len(self._pairs)

    def _model_q(self, q: np.ndarray) -> np.ndarray:
        if self._identity_order:
            return np.asarray(q, dtype=float)
        out = np.empty(len(q))
        out[self._joint_index] = q
        return out

    def in_collision(self, q: np.ndarray) -> bool:
        """True when any active pair collides at ``q`` (stops at the first hit)."""
        return bool(
            pin.computeCollisions(self.model, self.data, self.geom_model, self.geom_data, self._model_q(q), True)
        )

    def colliding_links(self, q: np.ndarray) -> list[tuple[str, str]]:
        """Every colliding active pair at ``q``, as (link, link) names."""
        pin.computeCollisions(self.model, self.data, self.geom_model, self.geom_data, self._model_q(q), False)
        out = []
        for k, (i, j) in enumerate(self._pairs):
            if self.geom_data.collisionResults[k].isCollision():
                out.append((self.body_of[i], self.body_of[j]))
        return out


def suggest_disabled_pairs(
    kin: Kinematics, *, samples: int = 20000, seed: int = 0, never_clearance_m: float = 0.03
) -> list[DisabledPair]:
    """Disabled pairs in the manner of MoveIt's setup assistant: adjacent links, pairs in
    collision at the home configuration ("Default"), and pairs that stay at least
    ``never_clearance_m`` apart over ``samples`` uniformly random configurations within
    the joint limits ("Never")."""
    checker = SelfCollisionChecker(kin, apply_srdf=False)
    names = checker.body_of
    out = list(checker.disabled)
    min_dist = np.full(len(checker._pairs), np.inf)
    at_home = checker.colliding_links(kin.home_rad)
    rng = np.random.default_rng(seed)
    gd = checker.geom_data
    for _ in range(samples):
        pin.computeDistances(
            checker.model,
            checker.data,
            checker.geom_model,
            gd,
            checker._model_q(kin.random_configuration(rng)),
        )
        for k in range(len(min_dist)):
            d = gd.distanceResults[k].min_distance
            if d < min_dist[k]:
                min_dist[k] = d
    seen = {frozenset((p.link1, p.link2)) for p in out}
    for a, b in at_home:
        if frozenset((a, b)) not in seen:
            out.append(DisabledPair(a, b, "Default"))
            seen.add(frozenset((a, b)))
    for k, (i, j) in enumerate(checker._pairs):
        key = frozenset((names[i], names[j]))
        if min_dist[k] > never_clearance_m and key not in seen:
            out.append(DisabledPair(names[i], names[j], "Never"))
            seen.add(key)
    return out
