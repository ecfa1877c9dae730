#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.caption_videos` (see --help)."""

from ltx_trainer.caption_videos import app

if __name__ == "__main__":
    app()
