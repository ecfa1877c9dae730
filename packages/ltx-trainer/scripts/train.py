#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.train CONFIG.yaml` (see --help); works under `accelerate launch` too."""

import sys

from ltx_trainer.train import main

if __name__ == "__main__":
    sys.exit(main())
