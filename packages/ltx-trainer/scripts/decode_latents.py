#!/usr/bin/env python3
"""Same as `python -m ltx_trainer.decode_latents` (see --help)."""

from ltx_trainer.decode_latents import app

if __name__ == "__main__":
    app()
