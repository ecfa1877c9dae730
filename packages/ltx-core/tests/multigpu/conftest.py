"""The rank jobs these tests spawn live beside them (`rank_jobs.py`): put this folder on `sys.path`, which
the spawned ranks inherit, so each rank can import the job it runs by its module name."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
