#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.compute_reference` (see --help)."""

from ltx_trainer.compute_reference import app

if __name__ == "__main__":
    app()
