"""Behaviour of the LTX-2.5 diffusion decoder on tiny in-test models (no golden files)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.devices import available_memory
from ltx_core.loader import CheckpointError, build_model
from ltx_core.model.video_vae import AxisTiling, TilingConfig
from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx_core.model.video_vae.diffusion_tiling import (
    DiffusionTileGeometry,
    decode_peak_bytes,
    tiling_for_memory,
)
from ltx_core.model.video_vae.spec import DIFFUSION_VIDEO_DECODER, VIDEO_DECODER, video_decoder_spec

from .conftest import TINY_DIFFUSION as TINY
from .conftest import tiny_diffusion_decoder as _tiny_decoder


def _vae_section(config: DiffusionDecoderConfig) -> dict:
    return {
        "_class_name": "CausalDiffusionVAE",
        "latent_channels": config.in_channels,
        "model_output_type": config.model_output_type,
        "decoder": {
            "in_channels": config.in_channels,
            "out_channels": config.out_channels,
            "patch_size": config.patch_size,
            "head_dim": config.head_dim,
            "t_emb_dim": config.t_emb_dim,
            "default_num_inference_steps": config.num_inference_steps,
            "timestep_scale_multiplier": config.timestep_scale_multiplier,
            "stage_channels": list(config.stage_channels),
            "stage_depths": list(config.stage_depths),
            "stage_kernels": [list(k) for k in config.stage_kernels],
            "upsamples": [[list(s), r] for s, r in config.upsamples],
            "stage5_kernel": list(config.stage5_kernel),
        },
    }


def _latent(shape=(1, 8, 3, 3, 4), seed: int = 1) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def test_config_round_trip_and_bad_values():
    assert DiffusionDecoderConfig.from_checkpoint_config(_vae_section(TINY)) == TINY
    bad = _vae_section(TINY)
    bad["decoder"]["stage_kernels"][2] = [3, 4, 3]
    with pytest.raises(CheckpointError, match="odd"):
        DiffusionDecoderConfig.from_checkpoint_config(bad)
    bad = _vae_section(TINY)
    bad["decoder"]["head_dim"] = 12
    with pytest.raises(CheckpointError, match="head_dim"):
        DiffusionDecoderConfig.from_checkpoint_config(bad)
    bad = _vae_section(TINY)
    bad["model_output_type"] = "eps"
    with pytest.raises(CheckpointError, match="accepted"):
        DiffusionDecoderConfig.from_checkpoint_config(bad)


def test_shapes_and_padding_of_small_latents():
    decoder = _tiny_decoder()
    latent = _latent((1, 8, 1, 1, 2))  # below the attention floor on every axis
    assert decoder.canvas_shape(latent.shape) == (1, 3, 17, 48, 48)
    with torch.no_grad():
        pixels = decoder(latent, generator=torch.Generator().manual_seed(0))
    assert pixels.shape == (1, 3, 1, 16, 32)
    assert torch.isfinite(pixels).all()
    with pytest.raises(ValueError, match="8 channels"):
        decoder(torch.zeros(1, 4, 2, 3, 3))


def test_generator_and_named_noise_drive_the_draw():
    decoder = _tiny_decoder()
    latent = _latent((1, 8, 2, 2, 3))
    (shape,) = decoder.noise_shapes(latent.shape)
    with torch.no_grad():
        a = decoder(latent, generator=torch.Generator().manual_seed(7))
        c = decoder(latent, generator=torch.Generator().manual_seed(8))
        replayed = decoder(latent, noise=[torch.randn(shape, generator=torch.Generator().manual_seed(7))])
        drawn: list[tuple[str, tuple[int, ...]]] = []

        def source(name, draw_shape, *, device, dtype):
            drawn.append((name, tuple(draw_shape)))
            return torch.randn(tuple(draw_shape), generator=torch.Generator().manual_seed(7), dtype=dtype)

        named = decoder(latent, noise=source)
    assert torch.equal(a, replayed) and torch.equal(a, named)
    assert not torch.allclose(a, c)
    assert drawn == [("decoder.0", shape)]
    with pytest.raises(ValueError, match="must have shape"):
        decoder(latent, noise=[torch.zeros(1, 3, 9, 48, 64)])


def _exact_zone(tiles, axis: int, length: int, band: int) -> torch.Tensor:
    """Pixels along `axis` farther than `band` from every cut of the tiles that weigh on them."""
    keep = torch.ones(length, dtype=torch.bool)
    for tile in tiles:
        span = tile.target[axis]
        start, stop = span.start, length if span.stop is None else span.stop
        if start > 0:
            keep[start : start + band] = False
        if stop < length:
            keep[max(0, stop - band) : stop] = False
    return keep


@pytest.mark.parametrize(
    "tiling, axis",
    [
        (TilingConfig(AxisTiling(), AxisTiling(), AxisTiling(64, 32)), 4),  # width: 2 tiles
        (TilingConfig(AxisTiling(14, 8), AxisTiling(), AxisTiling()), 2),  # frames: 2 tiles
    ],
)
def test_tiled_equals_untiled_outside_the_halo_bands(tiling, axis):
    """Tiles are decoded alone, so a pixel is exact when every tile weighing on it sees its whole
    receptive field: farther than the stage-4 + stage-5 (all steps) halo from that tile's cuts. The
    blended result equals the untiled decode there; within that band of a cut the blend mixes an
    inexact tile edge: |tiled - untiled| <= the larger of the two tiles' own deviations (convex
    weights), not asserted. The reference's overlaps cover one stage-5 pass only, as ours do."""
    decoder = _tiny_decoder()
    latent = _latent((1, 8, 3, 4, 6))
    tiles = decoder.tile_layout(latent.shape, tiling)
    assert len(tiles) == 2
    a = axis - 2
    # Receptive field of stages 4-5 in pixels: stage-4 blocks (upsampled), then every stage-5 block
    # of every denoising step (the steps compound), times the patch; +1 for the dropped first frame.
    stride = TINY.upsamples[3][0][a]
    k4, k5 = TINY.stage_kernels[3][a] // 2, TINY.stage5_kernel[a] // 2
    tokens = TINY.stage_depths[3] * k4 * stride + TINY.num_inference_steps * TINY.stage_depths[4] * k5
    band = tokens * (1 if a == 0 else TINY.patch_size) + 1
    with torch.no_grad():
        untiled = decoder(latent, generator=torch.Generator().manual_seed(3))
        tiled = torch.cat(list(decoder.decode_tiled(latent, tiling, generator=torch.Generator().manual_seed(3))), 2)
    assert tiled.shape == untiled.shape
    zone = _exact_zone(tiles, a, untiled.shape[axis], band)
    assert zone.any() and not zone.all()
    index = torch.nonzero(zone).flatten()
    torch.testing.assert_close(tiled.index_select(axis, index), untiled.index_select(axis, index), atol=1e-5, rtol=0)


def test_tiling_below_the_halo_is_refused():
    decoder = _tiny_decoder()
    with pytest.raises(ValueError, match="overlap 0 is below"):
        decoder.tile_layout((1, 8, 3, 4, 6), TilingConfig(AxisTiling(), AxisTiling(), AxisTiling(64, 0)))


def test_tiles_are_picked_from_free_memory():
    pixels = (17, 256, 384)
    untiled_peak = decode_peak_bytes(TINY, DiffusionTileGeometry.of(TINY), pixels, pixels, 4)
    assert tiling_for_memory(TINY, pixels, free_bytes=100 * untiled_peak) is None
    tiling = tiling_for_memory(TINY, pixels, free_bytes=untiled_peak // 2)
    assert tiling is not None and (tiling.height.tiled or tiling.width.tiled or tiling.frames.tiled)
    with pytest.raises(ValueError, match="memory budget"):
        tiling_for_memory(TINY, pixels, free_bytes=1024)
    cpu_free = available_memory(torch.device("cpu"))
    assert cpu_free is None or cpu_free > 0
    decoder = _tiny_decoder()
    assert decoder.recommended_tiling((1, 8, 3, 4, 6), free_bytes=1 << 40) is None
    latent_shape = (1, 8, 3, 16, 24)  # 17 x 256 x 384 pixels
    picked = decoder.recommended_tiling(latent_shape, free_bytes=untiled_peak // 2)
    assert picked is not None and len(decoder.tile_layout(latent_shape, picked)) > 1
    tile = tuple(a.tile_size if a.tiled else n for a, n in zip((picked.frames, picked.height, picked.width), pixels))
    assert decode_peak_bytes(TINY, DiffusionTileGeometry.of(TINY), pixels, tile, 4) < untiled_peak // 2


def test_loads_raw_layout_and_folds_static_gates(tmp_path):
    """A file in the released raw layout (fused qkv, `t_embedder.mlp.*`, static gates) builds through
    `build_model`; each gate scales its Linear per output channel, and the decode matches a module
    whose weights were scaled by hand."""
    reference = _tiny_decoder(seed=5)
    stored = {f"vae.decoder.{k}": v.clone() for k, v in reference.state_dict().items()}
    stored = {
        k.replace("vae.decoder.per_channel_statistics.", "vae.per_channel_statistics."): v for k, v in stored.items()
    }
    gates = {}
    for i, block in enumerate(reference.diff_blocks):
        for name in ("gate_msa", "gate_mlp", "gate_ctx"):
            gates[f"diff_blocks.{i}.{name}"] = torch.rand(block.context_proj.out_features) + 0.5
            stored[f"vae.decoder.diff_blocks.{i}.{name}"] = gates[f"diff_blocks.{i}.{name}"]
    path = tmp_path / "vae.safetensors"
    save_file(stored, str(path), metadata={"config": json.dumps({"vae": _vae_section(TINY)})})

    assert video_decoder_spec({"vae": _vae_section(TINY)}) is DIFFUSION_VIDEO_DECODER
    assert video_decoder_spec({"vae": {"_class_name": "CausalVideoAutoencoder"}}) is VIDEO_DECODER
    loaded = build_model(DIFFUSION_VIDEO_DECODER, path, dtype=torch.float32, device="cpu")
    with torch.no_grad():
        for i, block in enumerate(reference.diff_blocks):
            for gate, linear in (
                ("gate_msa", block.attn.proj),
                ("gate_mlp", block.mlp.w_down),
                ("gate_ctx", block.context_proj),
            ):
                g = gates[f"diff_blocks.{i}.{gate}"]
                linear.weight.mul_(g[:, None])
                if linear.bias is not None:
                    linear.bias.mul_(g)
        torch.testing.assert_close(loaded.diff_blocks[0].mlp.w_down.weight, reference.diff_blocks[0].mlp.w_down.weight)
        latent = _latent((1, 8, 2, 2, 3))
        want = reference(latent, generator=torch.Generator().manual_seed(2))
        got = loaded(latent, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_conv_decoder_spec_points_to_the_diffusion_one(tmp_path):
    path = tmp_path / "vae.safetensors"
    save_file(
        {"vae.decoder.conv_in.weight": torch.zeros(1)},
        str(path),
        metadata={"config": json.dumps({"vae": _vae_section(TINY)})},
    )
    with pytest.raises(CheckpointError, match="DIFFUSION_VIDEO_DECODER"):
        build_model(VIDEO_DECODER, path, device="cpu")
