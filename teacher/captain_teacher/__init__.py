"""The teacher: a privileged scripted policy that writes policy code.

It decides from the simulator snapshot on the host and acts only through python cells
against the robot API (see ``policy.py``). Planners per task type live in ``planners/``;
the helper library it defines in the session is in ``library.py``; variety and injected
mistakes in ``style.py``.
"""

from captain_teacher.policy import TeacherPolicy, make_teacher

__all__ = ["TeacherPolicy", "make_teacher"]
