"""The end-to-end tests share `serve_testing` (starting a demo server); with importlib imports, this folder
has to be on the path for it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
