#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.split_scenes` (see --help)."""

from ltx_trainer.split_scenes import app

if __name__ == "__main__":
    app()
