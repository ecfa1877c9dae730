#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.serve_captioner` (see --help)."""

from ltx_trainer.serve_captioner import app

if __name__ == "__main__":
    app()
