"""The teacher's planners: one generator of requests per kind of sub-task (pick and place,
the mug into the microwave by its handle, drawers, the stove knob, the microwave door), the
episode plan that orders them, and the final verification."""
