"""Shared set-up of the backends' tests: headless rendering, and the test helpers'
folder on the import path (pytest runs with ``--import-mode=importlib``)."""

import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
