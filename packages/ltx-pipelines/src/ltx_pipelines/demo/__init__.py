"""Tiny, randomly initialised model files in the released formats, for `--demo` runs.

The demo exercises the real pipeline code end to end on a machine with no downloads and no GPU. The
weights are random, so the output is noise; the point is that every code path a real run takes is taken.
Two sets, one per model family:

- `ltx-2.3` (`demo.ltx23`, the default): a single-file LTX checkpoint (all components under their released
  prefixes, config metadata), an x2 spatial upsampler file and a tiny Gemma 3 folder;
- `ltx-2.5` (`demo.ltx25`): one file per component, as LTX-2.5 is released, with its two IC-LoRAs.

`ensure_demo_assets(family=...)` (`demo.assets`) builds a set once into the user cache and verifies it on
every later use; `demo.files` holds what both sets write with.
"""

from ltx_pipelines.demo.assets import (
    DEFAULT_DEMO_FAMILY,
    DEMO_FAMILIES,
    MANIFEST_NAME,
    AnyDemoAssets,
    default_demo_dir,
    ensure_demo_assets,
    stale_parts,
)
from ltx_pipelines.demo.ltx23 import (
    DEMO_CONFIG,
    DEMO_GEMMA_HIDDEN,
    DEMO_GEMMA_LAYERS,
    DEMO_MODEL_VERSION,
    DEMO_UPSAMPLER_CONFIG,
    DemoAssets,
    demo_assets_at,
    write_demo_checkpoint,
    write_demo_gemma,
    write_demo_upsampler,
)
from ltx_pipelines.demo.ltx25 import DEMO_LTX25_MODEL_VERSION, Ltx25DemoAssets, ltx25_demo_assets_at

__all__ = [
    "DEFAULT_DEMO_FAMILY",
    "DEMO_CONFIG",
    "DEMO_FAMILIES",
    "DEMO_GEMMA_HIDDEN",
    "DEMO_GEMMA_LAYERS",
    "DEMO_LTX25_MODEL_VERSION",
    "DEMO_MODEL_VERSION",
    "DEMO_UPSAMPLER_CONFIG",
    "MANIFEST_NAME",
    "AnyDemoAssets",
    "DemoAssets",
    "Ltx25DemoAssets",
    "default_demo_dir",
    "demo_assets_at",
    "ensure_demo_assets",
    "ltx25_demo_assets_at",
    "stale_parts",
    "write_demo_checkpoint",
    "write_demo_gemma",
    "write_demo_upsampler",
]
