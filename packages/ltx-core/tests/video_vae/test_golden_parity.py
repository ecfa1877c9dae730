"""Parity with the reference video VAE (`fx_video_vae`), loaded through `build_model` like the pipelines.

Every shape, flag, tiling and optional tensor comes from the fixture file, so the same tests check
other fixture sets (causal or timestep-conditioned decoders, reflect padding, ...).
"""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.loader import VIDEO_DECODER_KEYS, VIDEO_ENCODER_KEYS, build_model
from ltx_core.model.video_vae import (
    VIDEO_DECODER,
    VIDEO_ENCODER,
    TilingConfig,
    VideoDecoder,
    VideoEncoder,
    conv_gemm,
    layers,
    time_winograd,
    winograd,
)
from ltx_core.tune import KERNEL_PATHS, KernelChoices, attach

pytestmark = pytest.mark.golden


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_video_vae")


@pytest.fixture(scope="module")
def encoder(golden_model_source) -> VideoEncoder:
    return build_model(VIDEO_ENCODER, golden_model_source, dtype=torch.float32, device="cpu")


@pytest.fixture(scope="module")
def decoder(golden_model_source) -> VideoDecoder:
    return build_model(VIDEO_DECODER, golden_model_source, dtype=torch.float32, device="cpu")


def _slices_as_lists(slices: tuple[slice, ...]) -> list[list[int | None]]:
    return [[s.start, s.stop] for s in slices]


def test_checkpoint_flags_match_fixture(decoder, fx):
    assert decoder.timestep_conditioning == fx.params["timestep_conditioning"]


@pytest.mark.parametrize("case, pixels", [("encode", "video"), ("encode_image", "image")])
def test_encode(encoder, fx, assert_golden_close, case, pixels):
    got = encoder(fx[f"{case}.{pixels}"])
    assert_golden_close(got, fx[f"{case}.latent"], name=f"{case}.latent")


def test_shared_statistics(encoder, decoder):
    for name in ("std-of-means", "mean-of-means"):
        assert torch.equal(
            encoder.per_channel_statistics.get_buffer(name), decoder.per_channel_statistics.get_buffer(name)
        )


def test_decode_every_case_of_the_set(decoder, fx, assert_golden_close):
    """`decode` always; `decode_t` (an explicit decode timestep) where the set's decoder is
    timestep-conditioned - a set whose decoder is not must not hold that case."""
    noise = fx["decode.noise"] if fx.params["timestep_conditioning"] else None
    assert ("decode.noise" in fx) == fx.params["timestep_conditioning"]
    got = decoder(fx["decode.latent"], noise=noise)
    assert_golden_close(got, fx["decode.video"], name="decode.video")

    if not fx.params["timestep_conditioning"]:
        assert "decode_t.video" not in fx
        return
    latent = fx["decode_t.latent"] if "decode_t.latent" in fx else fx["decode.latent"]
    noise = fx["decode_t.noise"] if "decode_t.noise" in fx else fx["decode.noise"]
    got = decoder(latent, timestep=fx["decode_t.timestep"], noise=noise)
    assert_golden_close(got, fx["decode_t.video"], name="decode_t.video")


def _skip_where_no_layer_takes(path: str, decoder: VideoDecoder, golden_lacks) -> None:
    """A decoder with no layer of a path's geometry (e.g. reflect-padded) cannot take it: skipped, saying why."""
    applies = {
        "winograd": winograd.winograd_applies,
        "time-winograd": time_winograd.time_winograd_applies,
        "gemm": lambda conv: conv_gemm.gemm_applies(conv, (1, conv.in_channels, 3, 1, 1), torch.float32),
        "channels-last": layers.channels_last_applies,
    }.get(path)
    convs = [m for m in decoder.modules() if isinstance(m, layers.CausalConv3d)]
    if applies is not None and not any(applies(m.conv) for m in convs):
        modes = sorted({m.conv.padding_mode for m in convs})
        golden_lacks(f"a decoder layer the {path} path applies to (padding modes {modes})")


@pytest.mark.parametrize("path", KERNEL_PATHS["conv3d-f32"])
def test_decode_with_each_forced_conv_path(decoder, fx, assert_golden_close, conv_paths_taken, golden_lacks, path):
    """Every CPU float32 convolution path the kernel choices can take ("direct", "merged" edge frames,
    spatial and time Winograd, the unfolded-window GEMM, channels-last copies), forced on every layer that can take it,
    holds the fixture's tolerance."""
    _skip_where_no_layer_takes(path, decoder, golden_lacks)
    calls = conv_paths_taken
    attach(decoder, KernelChoices.fixed({"conv3d-f32": path}))
    noise = fx["decode.noise"] if fx.params["timestep_conditioning"] else None
    try:
        with torch.no_grad():
            got = decoder(fx["decode.latent"], noise=noise)
    finally:
        attach(decoder, None)
    assert set(calls) == ({path} if path != "direct" else set()), f"layers did not take the {path} path"
    assert_golden_close(got, fx["decode.video"], name="decode.video")


@pytest.fixture(scope="module")
def bf16_decoder(golden_model_source) -> VideoDecoder:
    return build_model(VIDEO_DECODER, golden_model_source, dtype=torch.bfloat16, device="cpu")


def _bf16_decode_error(decoder: VideoDecoder, fx, path: str) -> tuple[float, float]:
    """(max, mean) |bf16 decode with `conv3d-half` forced to `path` - the float32 reference decode|."""
    attach(decoder, KernelChoices.fixed({"conv3d-half": path}))
    noise = fx["decode.noise"] if fx.params["timestep_conditioning"] else None
    try:
        with torch.no_grad():
            got = decoder(fx["decode.latent"].to(torch.bfloat16), noise=noise)
    finally:
        attach(decoder, None)
    assert got.dtype == torch.bfloat16
    error = (got.float() - fx["decode.video"]).abs()
    return float(error.max()), float(error.mean())


@pytest.mark.parametrize("path", KERNEL_PATHS["conv3d-half"])
def test_bf16_decode_with_each_forced_half_conv_path(bf16_decoder, fx, conv_paths_taken, golden_lacks, path):
    """Every native half-precision convolution path, forced on every layer that can take it, decodes
    the set's latent in bf16 within bf16 rounding of the float32 reference: at most 10% of its range
    (the bf16 upsampler's bound), and a non-default path within 2x the direct bf16 convolution's error
    (time Winograd measured 1.2x in max, 1.45x in mean on set A; the GEMM rounds as the direct convolution does)."""
    _skip_where_no_layer_takes(path, bf16_decoder, golden_lacks)
    direct_max, direct_mean = _bf16_decode_error(bf16_decoder, fx, "direct")
    calls = conv_paths_taken
    got_max, got_mean = _bf16_decode_error(bf16_decoder, fx, path)
    assert set(calls) == ({path} if path != "direct" else set()), f"layers did not take the {path} path"
    assert got_max <= 0.1 * float(fx["decode.video"].abs().max())
    assert got_max <= 2 * direct_max and got_mean <= 2 * direct_mean


def test_tile_layout(decoder, fx):
    tiling = TilingConfig.from_dict(fx.params["tiling"])
    tiles = decoder.tile_layout(fx["tiled.latent"].shape, tiling)
    assert [_slices_as_lists(t.source) for t in tiles] == fx.params["tiles_latent_slices_fhw"]
    assert [_slices_as_lists(t.target) for t in tiles] == fx.params["tiles_pixel_slices_fhw"]


def test_tiled_decode(decoder, fx, assert_golden_close):
    tiling = TilingConfig.from_dict(fx.params["tiling"])
    latent = fx["tiled.latent"]
    noises = None
    if fx.params["timestep_conditioning"]:
        count = len(decoder.tile_layout(latent.shape, tiling))
        noises = [fx[f"tiled.noise.{i}"] for i in range(count)]
        assert f"tiled.noise.{count}" not in fx
    chunks = list(decoder.decode_video(latent, tiling, noise=noises))
    assert [c.shape[0] for c in chunks] == fx.params["tiled_chunk_frames"]
    assert_golden_close(torch.cat(chunks), fx["tiled.rgb"], name="tiled.rgb")


@pytest.mark.parametrize("spec, rules", [(VIDEO_ENCODER, VIDEO_ENCODER_KEYS), (VIDEO_DECODER, VIDEO_DECODER_KEYS)])
def test_released_22b_key_manifest(golden_dir, spec, rules):
    manifest = json.loads((golden_dir / "ltx-2.3-22b-keys.json").read_text())
    with torch.device("meta"):
        module = spec.configurator(manifest["config"])
    want = {}
    for file_key, (shape, _dtype) in manifest["keys"].items():
        module_key = rules.rename(file_key)
        if module_key is not None:
            want[module_key] = tuple(shape)
    got = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    assert sorted(set(got) ^ set(want)) == []
    assert got == want
