"""Where a Gemma's weights are and the module they fit: what each source (a Gemma 3 folder, a packed Gemma 4
file, a GGUF Gemma 3) describes for `modes.load_gemma_weights`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ltx_core.loader.sd_ops import SDOps


@dataclass(frozen=True)
class GemmaWeights:
    """Where a Gemma's weights are and the module they fit."""

    files: tuple[Path, ...]
    """One file, or the shards of one model."""
    ops: SDOps
    """File keys -> module keys (and value fix-ups, e.g. GGUF's shifted norms)."""
    layers: str
    """Dotted path of the decoder-layer ModuleList inside the module."""
    make_model: Callable[[], nn.Module]
    """The module, called on the meta device under the run dtype as default dtype."""
    cast_buffers: bool = False
    """Cast computed floating buffers (rotary frequencies, embedding scale) to the run dtype (the packed
    Gemma 4 loader's convention); False keeps them as transformers builds them (its folder loader's)."""
    tied: frozenset[str] = frozenset({"lm_head.weight"})
    """Module keys that share another weight and are never in the file."""
