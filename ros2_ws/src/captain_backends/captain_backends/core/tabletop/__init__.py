"""Native MuJoCo tabletop backend: robosuite's Panda at a table with a few objects.

Import ``captain_backends.core.tabletop.driver.TabletopDriver`` (registered as the
``"tabletop"`` driver). Rendering is headless through EGL; ``MUJOCO_GL`` defaults to
``egl`` when the driver module is imported before MuJoCo.
"""
