"""ROS-free core of perception and measurement.

Modules, by concept:

* ``backproject``: pixels to metric points and back, robust depth at a pixel;
* ``pointcloud``: a camera frame's point cloud in the base frame, colour in L*a*b*,
  normals, support planes;
* ``region``: surface pieces of a frame and region growing around a seed pixel;
* ``geometry``: object geometry (footprint, centre, extents, yaw, heights, resting);
* ``contact``: how the jaws meet an object at a pose, what a release would do;
* ``segmenters``: text-prompted segmenters (classical, SAM 3) behind one interface;
* ``pointer``: pointing by a VLM behind an OpenAI-compatible endpoint;
* ``store``: observations and detections by handle and id;
* ``detections``: from a detection to its object's pixels, points and geometry;
* ``tracking``: re-finding an object in a newer observation;
* ``robot_state``: the robot state captured with each observation;
* ``perception_base``: configuration, the self-filter's use and helpers shared by the calls;
* ``self_filter``: the robot's own pixels in a frame, from its kinematic model;
* ``observing`` / ``selection`` / ``measuring``: the policy-facing ``@primitive`` calls by
  concept (observe and mark/segment/point; select and track; measurements);
* ``primitives``: ``Perception``, which puts the calls together, and the entry point's ``build``.
"""
