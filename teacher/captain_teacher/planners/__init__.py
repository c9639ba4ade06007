"""The teacher's planners: one generator of requests per kind of sub-task (pick and place,
drawers, the stove knob, the microwave door), the episode plan that orders them, and the
final verification."""
