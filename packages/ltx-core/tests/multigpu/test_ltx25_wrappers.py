"""The tiled data-parallel wrapper hands each tile its part of the LTX-2.5 keyframes mask (the
sequence-parallel sharding of the mask is checked in test_sequence_parallel)."""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from ltx_core.latent_tiles import AxisTileCount, TileCounts
from ltx_core.model.transformer import Modality, ModelVariant, configure_transformer
from ltx_core.multigpu import TiledDataParallelTransformer

from ..transformer.conftest import TINY_TRANSFORMER, _positions, randomize_

LTX25 = {
    "ff_bias": False,
    "audio_ff_bias": False,
    "use_prompt_adaln_single": False,
    "use_keyframes_abs_pos_embedding": True,
}
FRAMES, HEIGHT, WIDTH = 1, 2, 4


def _model():
    config = {"transformer": {**copy.deepcopy(TINY_TRANSFORMER), **LTX25}}
    return randomize_(configure_transformer(config, ModelVariant.AUDIO_VIDEO), seed=7)


def _inputs(video_tokens: int, audio_tokens: int, seed: int = 0) -> tuple[Modality, Modality]:
    g = torch.Generator().manual_seed(seed)
    sigma = torch.tensor([0.7])
    marks = (torch.rand(1, video_tokens, 1, generator=g) > 0.5).float()
    video = Modality(
        latent=torch.randn(1, video_tokens, 16, generator=g),
        timesteps=sigma[:, None, None].expand(1, video_tokens, 1).clone(),
        sigma=sigma.clone(),
        positions=_positions(1, video_tokens, 3, 0.25),
        context=torch.randn(1, 5, 16, generator=g),
        keyframes_mask=marks,
    )
    audio = Modality(
        latent=torch.randn(1, audio_tokens, 8, generator=g),
        timesteps=sigma[:, None, None].expand(1, audio_tokens, 1).clone(),
        sigma=sigma.clone(),
        positions=_positions(1, audio_tokens, 1, 0.04),
        context=torch.randn(1, 5, 8, generator=g),
    )
    return video, audio


def test_tiles_get_their_part_of_the_keyframes_mask():
    """Two width tiles without overlap: each tile's tokens are the model run on that tile alone, with
    the tile's own slice of the mask (a whole-clip mask would fail the model's shape check)."""
    model = _model()
    video, audio = _inputs(FRAMES * HEIGHT * WIDTH, 5, seed=2)
    counts = TileCounts(width=AxisTileCount(2, overlap=0))
    with torch.inference_mode():
        got_v, _ = TiledDataParallelTransformer(model, (FRAMES, HEIGHT, WIDTH), counts, normalize_positions=False)(
            video, audio
        )
        cols = torch.arange(FRAMES * HEIGHT * WIDTH).reshape(FRAMES, HEIGHT, WIDTH)
        left = cols[..., :2].flatten()
        tile = replace(
            video,
            latent=video.latent[:, left],
            timesteps=video.timesteps[:, left],
            positions=video.positions[:, :, left],
            keyframes_mask=video.keyframes_mask[:, left],
        )
        want_left, _ = model(tile, audio)
    got_left = got_v.reshape(FRAMES, HEIGHT, WIDTH, -1)[..., :2, :].reshape(1, -1, got_v.shape[-1])
    assert torch.allclose(got_left, want_left, atol=1e-6, rtol=0)
