"""Config variants of the released family, checked on tiny random models: causality, padding, timestep conditioning."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import CheckpointError
from ltx_core.model.video_vae import (
    DECODE_NOISE_SCALE,
    TilingConfig,
    VideoDecoder,
    VideoEncoder,
    VideoVAEConfig,
    video_decoder_from_config,
)
from ltx_core.model.video_vae.blocks import ResBlockStack
from ltx_core.model.video_vae.layers import CausalConv3d


def _latent(decoder: VideoDecoder, frames: int, height: int = 2, width: int = 2, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, decoder.config.latent_channels, frames, height, width, generator=g)


def _video(frames: int, height: int = 64, width: int = 64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(1, 3, frames, height, width, generator=g) * 2 - 1


def test_shapes(make_vae):
    encoder, decoder = make_vae()
    latent = encoder(_video(17, 64, 96))
    assert latent.shape == (1, 8, 3, 2, 3)
    assert decoder(latent).shape == (1, 3, 17, 64, 96)
    assert encoder(_video(1, 32, 32)).shape == (1, 8, 1, 1, 1)


def test_encoder_is_causal(make_vae):
    encoder, _ = make_vae()
    video = _video(25)
    whole = encoder(video)
    prefix = encoder(video[:, :, :9])
    torch.testing.assert_close(prefix, whole[:, :, :2], atol=1e-5, rtol=0)
    # Frame 0 alone is the first latent frame: encoding an image is encoding a 1-frame video.
    torch.testing.assert_close(encoder(video[:, :, :1]), whole[:, :, :1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_decoder_time_dependence(make_vae, causal):
    _, decoder = make_vae(causal_decoder=causal)
    assert decoder.causal is causal
    latent = _latent(decoder, 4)
    edited = latent.clone()
    edited[:, :, -1] += 1.0
    before, after = decoder(latent), decoder(edited)
    settled = 1 + 8 * 2  # pixel frames decoded from latent frames 0..2
    change = (after - before)[:, :, :settled].abs().max().item()
    if causal:
        assert change == 0.0, "a causal decoder's early frames must not depend on later latents"
    else:
        assert change > 1e-3, "a non-causal decoder looks ahead"


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_padding_modes(make_vae, mode):
    encoder, decoder = make_vae(spatial_padding_mode=mode)
    for module in (encoder, decoder):
        modes = {m.conv.padding_mode for m in module.modules() if isinstance(m, CausalConv3d)}
        assert modes == {mode}


def test_padding_mode_changes_output(make_vae):
    _, zeros = make_vae(spatial_padding_mode="zeros")
    _, reflect = make_vae(spatial_padding_mode="reflect")
    latent = _latent(zeros, 2)
    assert (zeros(latent) - reflect(latent)).abs().max() > 1e-3


def test_padding_defaults_and_precedence(tiny_vae_config):
    del tiny_vae_config["spatial_padding_mode"]
    config = VideoVAEConfig.from_checkpoint_config(tiny_vae_config)
    assert (config.encoder_padding, config.decoder_padding) == ("zeros", "reflect")
    tiny_vae_config["encoder_spatial_padding_mode"] = "reflect"
    config = VideoVAEConfig.from_checkpoint_config(tiny_vae_config)
    assert config.encoder_padding == "reflect"
    # The flat header's spatial_padding_mode applies to the encoder too (reference precedence).
    tiny_vae_config.update(spatial_padding_mode="zeros")
    config = VideoVAEConfig.from_checkpoint_config(tiny_vae_config)
    assert (config.encoder_padding, config.decoder_padding) == ("zeros", "zeros")


def test_config_defaults_when_absent():
    config = VideoVAEConfig.from_checkpoint_config({"encoder_blocks": [], "decoder_blocks": []})
    assert config.timestep_conditioning is True
    assert config.causal_decoder is False
    assert config.decoder_base_channels == 128
    assert (config.latent_channels, config.patch_size, config.latent_log_var) == (128, 4, "uniform")


def test_timestep_conditioned_decoder_keys(tiny_vae_config):
    tiny_vae_config["timestep_conditioning"] = True
    with torch.device("meta"):
        decoder = video_decoder_from_config({"vae": tiny_vae_config})
    keys = set(decoder.state_dict())
    assert {"timestep_scale_multiplier", "last_scale_shift_table"} <= keys
    assert "last_time_embedder.timestep_embedder.linear_1.weight" in keys
    stacks = [i for i, b in enumerate(decoder.up_blocks) if isinstance(b, ResBlockStack)]
    for i in stacks:
        assert f"up_blocks.{i}.time_embedder.timestep_embedder.linear_2.bias" in keys
        assert f"up_blocks.{i}.res_blocks.0.scale_shift_table" in keys
    width = decoder.up_blocks[stacks[0]].res_blocks[0].conv1.conv.in_channels
    assert decoder.state_dict()[f"up_blocks.{stacks[0]}.res_blocks.0.scale_shift_table"].shape == (4, width)
    assert decoder.state_dict()["last_scale_shift_table"].shape == (2, decoder.conv_out.conv.in_channels)


def test_timestep_conditioned_noise_and_generator(make_vae):
    _, decoder = make_vae(timestep_conditioning=True)
    latent = _latent(decoder, 2)
    noise = torch.randn(latent.shape, generator=torch.Generator().manual_seed(7))
    from_generator = decoder(latent, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(decoder(latent, noise=noise), from_generator, atol=0, rtol=0)
    # Input = 0.025 noise + 0.975 latent: the same as no noise on a shifted latent.
    shifted = latent + noise * DECODE_NOISE_SCALE / (1 - DECODE_NOISE_SCALE)
    torch.testing.assert_close(
        decoder(latent, noise=noise), decoder(shifted, noise=torch.zeros_like(noise)), atol=1e-5, rtol=1e-5
    )
    # Default timestep is 0.05; other timesteps change the output.
    torch.testing.assert_close(decoder(latent, noise=noise, timestep=0.05), decoder(latent, noise=noise))
    other = decoder(latent, noise=noise, timestep=torch.tensor([0.5]))
    assert (other - decoder(latent, noise=noise)).abs().max() > 1e-3


def test_tiled_timestep_conditioned_noise_per_tile(make_vae):
    _, decoder = make_vae(timestep_conditioning=True)
    latent = _latent(decoder, 5, 3, 2)
    tiling = TilingConfig.from_dict(
        {"frames": {"tile_size": 24, "overlap": 8}, "height": {"tile_size": 64, "overlap": 32}}
    )
    tiles = decoder.tile_layout(latent.shape, tiling)
    assert len(tiles) == 4
    g = torch.Generator().manual_seed(3)
    noises = [torch.randn(latent[(slice(None), slice(None), *t.source)].shape, generator=g) for t in tiles]
    explicit = torch.cat(list(decoder.decode_tiled(latent, tiling, noise=noises)), dim=2)
    drawn = torch.cat(list(decoder.decode_tiled(latent, tiling, generator=torch.Generator().manual_seed(3))), dim=2)
    torch.testing.assert_close(explicit, drawn, atol=0, rtol=0)
    with pytest.raises(ValueError, match="one noise per tile: 4 tiles, got 3"):
        decoder.decode_tiled(latent, tiling, noise=noises[:3])
    with pytest.raises(ValueError, match="noise 1 must have shape"):
        decoder.decode_tiled(latent, tiling, noise=[noises[0], noises[2], noises[2], noises[3]])


def test_plain_decoder_rejects_noise_and_timestep(make_vae):
    _, decoder = make_vae(timestep_conditioning=False)
    latent = _latent(decoder, 1)
    with pytest.raises(ValueError, match="not timestep-conditioned"):
        decoder(latent, noise=torch.zeros_like(latent))
    with pytest.raises(ValueError, match="not timestep-conditioned"):
        decoder(latent, timestep=0.05)


@pytest.mark.parametrize(
    "overrides",
    [
        {"norm_layer": "group_norm", "latent_channels": 32, "decoder_base_channels": 32},
        {"latent_log_var": "per_channel"},
        {"latent_log_var": "constant"},
        {
            "encoder_blocks": [
                ["res_x_y", {"multiplier": 2}],
                ["compress_all_x_y", 1],
                ["compress_space", 1],
                ["compress_time", {}],
                ["compress_all", {}],
            ],
            "decoder_blocks": [
                ["res_x_y", {"multiplier": 2}],
                ["compress_all", {"multiplier": 2, "residual": True}],
                ["compress_space", {}],
                ["compress_time", {}],
                ["compress_all", {"residual": True}],
            ],
            "decoder_base_channels": 8,
        },
    ],
)
def test_block_and_norm_variants_build_and_run(make_vae, overrides):
    encoder, decoder = make_vae(**overrides)
    latent = encoder(_video(9))
    assert latent.shape == (1, encoder.latent_channels, 2, 2, 2)
    assert decoder(latent).shape == (1, 3, 9, 64, 64)


def test_bf16_weights_run_on_cpu(make_vae):
    encoder, decoder = make_vae()
    video = _video(9)
    want = decoder(encoder(video))
    encoder, decoder = encoder.to(torch.bfloat16), decoder.to(torch.bfloat16)
    latent = encoder(video)
    assert latent.dtype == torch.float32
    got = decoder(latent)
    assert got.dtype == torch.float32
    # bf16 rounding through a random net: measured mean |diff| 0.01 against mean |pixel| 0.43.
    assert (got - want).abs().mean() < 0.05 * want.abs().mean()


@pytest.mark.parametrize(
    "section, message",
    [
        ({"_class_name": "CausalDiffusionVAE"}, "CausalDiffusionVAE"),
        ({"dims": 2}, "dims"),
        ({"encoder_blocks": [["attn", {}]]}, "unsupported block 'attn'"),
        ({"decoder_blocks": [["compress_all_res", {}]]}, "unsupported block 'compress_all_res'"),
        ({"decoder_blocks": [["res_x", {"num_layers": 1, "inject_noise": True}]]}, "inject_noise"),
        ({"spatial_padding_mode": "mirror"}, "'mirror'"),
        ({"norm_layer": "layer_norm"}, "layer_norm"),
    ],
)
def test_bad_configs(tiny_vae_config, section, message):
    tiny_vae_config.update(section)
    with pytest.raises(CheckpointError, match=message):
        VideoVAEConfig.from_checkpoint_config(tiny_vae_config)


def test_encoder_and_decoder_are_separate_components(make_vae):
    encoder, decoder = make_vae()
    assert isinstance(encoder, VideoEncoder) and isinstance(decoder, VideoDecoder)
    assert not any(k.startswith("up_blocks") for k in encoder.state_dict())
    assert not any(k.startswith("down_blocks") for k in decoder.state_dict())
