"""The measurement calls: object geometry, image points, contact, release, comparison."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from captain_harness.core.api import primitive
from captain_harness.core.arguments import as_choice, as_float, as_position, as_quaternion
from captain_harness.core.geometry import quat_to_matrix
from captain_harness.core.results import CallOutcome, format_receipt, ok
from captain_perception.core.contact import inspect_contact, predict_release
from captain_perception.core.detections import CAMERA_CHOICES, detection_mask, object_views
from captain_perception.core.errors import BackendUnavailableError, InvalidPerceptionArgument, NothingFoundError
from captain_perception.core.geometry import RESTING_TOLERANCE_M, SHAPES
from captain_perception.core.perception_base import SAME_REGION_OVERLAP, PerceptionBase
from captain_perception.core.store import Detection


class MeasurementCalls(PerceptionBase):
    """``measure_object_geometry``, ``measure_image_points``, ``inspect_contact_geometry``,
    ``inspect_release_geometry``, ``compare_object_observations``."""

    # ============================================================= measurement
    @primitive(group="measurement")
    def measure_object_geometry(self, object_id: str, destination_id: str | None = None, shape: str = "box",
                                cameras: str = "primary") -> CallOutcome:
        """Centre, extents, yaw, top height and footprint of an object, and its offset to a destination.

        ``shape``: ``"box"`` (oriented-box extents; the footprint is classified circle or
        rectangle from the outline), ``"auto"`` (extents from that fit) or ``"cylinder"``
        (circular footprint). ``cameras``: ``"primary"`` (the detection's camera) or
        ``"all"`` (also the observation's other cameras). Value: ``object`` and
        ``destination`` (None without one), each with ``center_m``, ``center_xy_m``,
        ``top_z_m``, ``bottom_z_m``, ``extents_m`` [length, width, height],
        ``yaw_rad``, ``footprint`` {``shape``, ``radius_m``, ...}, ``resting``; and
        ``object_to_destination_xy_offset_m`` = object centre minus destination centre
        (x, y; subtract it from a carried object's position to centre it),
        ``xy_distance_m``, ``resting_height_consistent`` (the object's bottom sits on the
        destination when above it, else on the surface around it).
        """
        shape = as_choice("shape", shape, SHAPES)
        cameras = as_choice("cameras", cameras, CAMERA_CHOICES)
        obj_det = self.store.detection(object_id, name="object_id")
        dest_det = self.store.detection(destination_id, name="destination_id") if destination_id is not None else None
        if dest_det is not None:
            self._require_distinct_regions(obj_det, dest_det)
        obj = self._geometry(obj_det, shape, cameras)
        dest = self._geometry(dest_det, shape, cameras) if dest_det is not None else None
        value: dict[str, Any] = {"object": {"detection_id": obj_det.detection_id, **obj.to_dict()},
                                 "destination": None, "object_to_destination_xy_offset_m": None,
                                 "xy_distance_m": None, "shape": shape, "cameras": cameras}
        fields: list[tuple[str, Any]] = [("object", obj_det.detection_id), ("center_m", np.round(obj.center_m, 4)),
                                         ("radius_m", obj.footprint.radius_m), ("top_z_m", obj.top_z_m)]
        consistent = bool(obj.resting) if obj.resting is not None else False
        if dest is not None:
            offset = np.array(obj.center_xy_m) - np.array(dest.center_xy_m)
            dist = float(np.linalg.norm(offset))
            over = dist <= dest.footprint.radius_m
            if over:
                # resting on the destination: bottom between the destination's bottom and top (+ tolerance)
                consistent = bool(dest.bottom_z_m - RESTING_TOLERANCE_M <= obj.bottom_z_m
                                  <= dest.top_z_m + RESTING_TOLERANCE_M) and bool(obj.resting is not False)
            value.update(destination={"detection_id": dest_det.detection_id, **dest.to_dict()},
                         object_to_destination_xy_offset_m=np.round(offset, 5).tolist(),
                         xy_distance_m=round(dist, 5), object_over_destination=bool(over),
                         object_within_destination_footprint=bool(dist + obj.footprint.radius_m
                                                                  <= dest.footprint.radius_m + 0.005))
            fields = [("object", obj_det.detection_id), ("destination", dest_det.detection_id),
                      ("object_to_destination_xy_offset_m", np.round(offset, 4)), ("xy_distance_m", dist),
                      ("radius_m", obj.footprint.radius_m)]
        value["resting_height_consistent"] = consistent
        fields.append(("resting_height_consistent", consistent))
        result = ok(value)
        return CallOutcome(result, format_receipt("measure_object_geometry", result, fields))

    def _require_distinct_regions(self, obj_det: Detection, dest_det: Detection) -> None:
        """Refuse an object and a destination that are one region of one image: their offset
        would be about zero whatever the scene (e.g. both clicks landed on the object, or
        the object and what it rests on were segmented together)."""
        if obj_det.observation_handle != dest_det.observation_handle or obj_det.camera != dest_det.camera:
            return
        obs = self.store.observation(obj_det.observation_handle)
        a = detection_mask(obs, obj_det, self.config.region)
        b = detection_mask(obs, dest_det, self.config.region)
        either = int(np.count_nonzero(a | b))
        shared = int(np.count_nonzero(a & b))
        if either and shared >= SAME_REGION_OVERLAP * either:
            raise InvalidPerceptionArgument(
                f"{obj_det.detection_id} and {dest_det.detection_id} are the same region of {obj_det.camera} "
                f"({shared} of {either} pixels shared), so their offset would mean nothing; mark each on its own "
                "body (the object where it does not touch the destination), or look from another camera")

    @primitive(group="measurement")
    def measure_image_points(self, observation_handle: str, camera: str, points: list) -> CallOutcome:
        """Metric base-frame points for pixels ``points`` = [[u, v], ...] (normalised, at most 32).

        Value: ``points`` (each ``uv``, ``position_m`` or None, ``depth_m``, ``on_edge``;
        ``on_robot`` True and no position for a pixel on the robot itself)
        and ``distances_m`` (pairwise, for up to 8 points).
        """
        obs = self.store.observation(observation_handle)
        camera = self._camera(obs, camera)
        if not isinstance(points, (list, tuple, np.ndarray)) or len(points) == 0:
            raise InvalidPerceptionArgument("points must be a non-empty list of [u, v] pairs, e.g. [[0.5, 0.4]]")
        if len(points) > 32:
            raise InvalidPerceptionArgument(f"at most 32 points per call, got {len(points)}")
        out, positions = [], []
        for i, p in enumerate(points):
            if not isinstance(p, (list, tuple, np.ndarray)) or len(p) != 2:
                raise InvalidPerceptionArgument(f"points[{i}] must be [u, v], got {p!r}")
            x, y = self._uv(p[0], p[1], obs.frames[camera])
            if self._on_robot(obs, camera, x, y):
                out.append({"uv": [float(p[0]), float(p[1])], "position_m": None, "depth_m": None, "on_edge": None,
                            "on_robot": True})
                positions.append(None)
                continue
            try:
                pos, sd = self._surface_point(obs, camera, x, y)
                out.append({"uv": [float(p[0]), float(p[1])], "position_m": np.round(pos, 5).tolist(),
                            "depth_m": round(sd.depth_m, 5), "on_edge": sd.on_edge})
                positions.append(pos)
            except NothingFoundError:
                out.append({"uv": [float(p[0]), float(p[1])], "position_m": None, "depth_m": None, "on_edge": None})
                positions.append(None)
        value: dict[str, Any] = {"points": out, "valid": sum(p is not None for p in positions)}
        if 2 <= len(positions) <= 8:
            value["distances_m"] = [[None if a is None or b is None else round(float(np.linalg.norm(a - b)), 5)
                                     for b in positions] for a in positions]
        result = ok(value)
        fields = [("valid", value["valid"]), ("count", len(out))]
        if positions and positions[0] is not None:
            fields.append(("first_position_m", np.round(positions[0], 4)))
        return CallOutcome(result, format_receipt("measure_image_points", result, fields))

    @primitive(group="measurement")
    def inspect_contact_geometry(self, detection_id: str, position: list, quaternion: list,
                                 opening_m: float | None = None) -> CallOutcome:
        """How the jaws would meet the object with the TCP at ``position`` / ``quaternion``.

        Tool frame: z = approach, x = jaw-closing axis. Value: ``width_needed_m``,
        ``fits`` (below the opening), ``straddles`` (fingers close on both sides),
        ``clearance_m`` per finger and ``min_clearance_m`` (negative: a finger would
        hit the object on the way in), ``contact_depth_m``, ``palm_contact``,
        ``fingertip_height_above_support_m``, ``obstructed_fingers`` (other things in
        an open finger's way), ``tcp_to_object_center_m``.
        """
        det = self.store.detection(detection_id)
        pos = as_position("position", position)
        q = as_quaternion("quaternion", quaternion)
        gripper = self.config.gripper
        opening = None if opening_m is None else as_float("opening_m", opening_m, minimum=0.0,
                                                         maximum=gripper.max_opening_m, unit="m")
        obs = self.store.observation(det.observation_handle)
        views = object_views(obs, det, self.config.region, "primary")
        geom = self._geometry(det, "box", "primary")
        cloud = obs.cloud(det.camera)
        mask = views[0].mask
        others = cloud.points_base[::2, ::2][~mask[::2, ::2]]
        others = others[np.isfinite(others[:, 2])]
        near = np.linalg.norm(others - pos, axis=1) < 0.15
        R = quat_to_matrix(q)
        info = inspect_contact(views[0].points, pos, R, gripper, opening_m=opening,
                               support_z_m=geom.support_z_m, obstacle_points=others[near])
        info["detection_id"] = det.detection_id
        info["tcp_to_object_center_m"] = np.round(np.array(geom.center_m) - pos, 5).tolist()
        info["object_top_z_m"] = round(geom.top_z_m, 5)
        info["observed_points_only"] = True
        result = ok(info)
        fields = [("detection_id", det.detection_id), ("width_needed_m", info["width_needed_m"]),
                  ("straddles", info["straddles"]), ("min_clearance_m", info["min_clearance_m"]),
                  ("contact_depth_m", info["contact_depth_m"])]
        if info["obstructed_fingers"]:
            fields.append(("obstructed", info["obstructed_fingers"]))
        return CallOutcome(result, format_receipt("inspect_contact_geometry", result, fields))

    @primitive(group="measurement")
    def inspect_release_geometry(self, object_id: str, position: list, quaternion: list | None = None,
                                 destination_id: str | None = None) -> CallOutcome:
        """What releasing the held object with the TCP at ``position`` would do.

        The object is carried rigidly from its measured pose relative to the current
        TCP. Value: ``predicted_center_m``, ``predicted_bottom_z_m``, ``support_z_m``
        (over the destination: its top for boxy ones, half its height for round ones
        such as plates and bowls; else the table), ``drop_height_m``,
        ``object_to_destination_xy_offset_m``, ``xy_distance_m``,
        ``center_over_destination``, ``footprint_within_destination``.
        """
        det = self.store.detection(object_id, name="object_id")
        pos = as_position("position", position)
        q = None if quaternion is None else as_quaternion("quaternion", quaternion)
        dest_det = self.store.detection(destination_id, name="destination_id") if destination_id is not None else None
        obs = self.store.observation(det.observation_handle)
        tcp = obs.robot_state.get("end_effector_position_m")
        if tcp is None:
            raise BackendUnavailableError("the observation has no end_effector_position_m; the robot state provider "
                                          "is missing forward kinematics")
        geom = self._geometry(det, "box", "primary")
        R_now = None
        if q is not None and obs.robot_state.get("end_effector_quaternion_wxyz") is not None:
            R_now = quat_to_matrix(np.asarray(obs.robot_state["end_effector_quaternion_wxyz"], float))
        pred = predict_release(np.array(geom.center_m), geom.bottom_z_m, np.asarray(tcp, float), pos, R_now,
                               None if q is None or R_now is None else quat_to_matrix(q))
        centre = pred["predicted_center_m"]
        value: dict[str, Any] = {"detection_id": det.detection_id,
                                 "predicted_center_m": np.round(centre, 5).tolist(),
                                 "predicted_bottom_z_m": round(pred["predicted_bottom_z_m"], 5),
                                 "held_offset_m": np.round(pred["held_offset_m"], 5).tolist(),
                                 "rotation_applied": R_now is not None and q is not None}
        support = obs.cloud(det.camera).table_height_m()
        fields: list[tuple[str, Any]] = [("detection_id", det.detection_id),
                                         ("predicted_center_m", np.round(centre, 4))]
        if dest_det is not None:
            dest = self._geometry(dest_det, "box", "primary")
            offset = centre[:2] - np.array(dest.center_xy_m)
            dist = float(np.linalg.norm(offset))
            over = dist <= dest.footprint.radius_m
            if over:
                support = dest.top_z_m if dest.footprint.shape == "rectangle" else \
                    max(dest.bottom_z_m, dest.top_z_m - 0.5 * (dest.top_z_m - dest.bottom_z_m))
            value.update(destination_id=dest_det.detection_id,
                         object_to_destination_xy_offset_m=np.round(offset, 5).tolist(), xy_distance_m=round(dist, 5),
                         center_over_destination=bool(over),
                         footprint_within_destination=bool(dist + geom.footprint.radius_m
                                                           <= dest.footprint.radius_m + 0.005))
            fields += [("object_to_destination_xy_offset_m", np.round(offset, 4)), ("xy_distance_m", dist)]
        value["support_z_m"] = None if support is None else round(float(support), 5)
        drop = None if support is None else float(pred["predicted_bottom_z_m"] - support)
        value["drop_height_m"] = None if drop is None else round(drop, 5)
        if drop is not None:
            fields.append(("drop_height_m", drop))
        result = ok(value)
        return CallOutcome(result, format_receipt("inspect_release_geometry", result, fields))

    @primitive(group="measurement")
    def compare_object_observations(self, first_id: str, second_id: str, shape: str = "box") -> CallOutcome:
        """How an object moved between two detections of it (e.g. before and after a push).

        Value: ``displacement_m`` (second minus first centre), ``xy_distance_m``,
        ``top_z_change_m``, ``yaw_change_rad`` (rectangles only), ``size_ratio``,
        ``moved`` (more than 1 cm), ``first`` and ``second`` geometry.
        """
        shape = as_choice("shape", shape, SHAPES)
        a_det = self.store.detection(first_id, name="first_id")
        b_det = self.store.detection(second_id, name="second_id")
        a = self._geometry(a_det, shape, "primary")
        b = self._geometry(b_det, shape, "primary")
        disp = np.array(b.center_m) - np.array(a.center_m)
        xy = float(np.linalg.norm(disp[:2]))
        yaw = None
        if a.footprint.shape == "rectangle" and b.footprint.shape == "rectangle":
            yaw = (b.yaw_rad - a.yaw_rad + math.pi / 2) % math.pi - math.pi / 2
        ratio = b.footprint.radius_m / a.footprint.radius_m if a.footprint.radius_m > 0 else None
        moved = bool(xy > 0.01 or abs(disp[2]) > 0.01)
        value = {"first": {"detection_id": a_det.detection_id, **a.to_dict()},
                 "second": {"detection_id": b_det.detection_id, **b.to_dict()},
                 "displacement_m": np.round(disp, 5).tolist(), "xy_distance_m": round(xy, 5),
                 "top_z_change_m": round(b.top_z_m - a.top_z_m, 5),
                 "yaw_change_rad": None if yaw is None else round(yaw, 4),
                 "size_ratio": None if ratio is None else round(ratio, 3), "moved": moved}
        result = ok(value)
        return CallOutcome(result, format_receipt("compare_object_observations", result, [
            ("displacement_m", np.round(disp, 4)), ("xy_distance_m", xy), ("moved", moved)]))

