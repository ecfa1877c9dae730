#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.process_videos` (see --help)."""

from ltx_trainer.process_videos import app

if __name__ == "__main__":
    app()
