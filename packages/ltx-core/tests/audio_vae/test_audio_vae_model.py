"""Audio VAE variants built from modified configs: shapes, key layout, causality, loading and input checks."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import CheckpointError, build_model
from ltx_core.model.audio_vae import (
    AUDIO_DECODER,
    AUDIO_ENCODER,
    AudioDecoder,
    AudioEncoder,
    AudioVAEConfig,
    audio_decoder_from_config,
    audio_encoder_from_config,
)


def _models(config, randomize):
    return randomize(audio_encoder_from_config(config), 1), randomize(audio_decoder_from_config(config), 2)


@pytest.mark.parametrize("mel_frames", [1, 2, 5, 41, 50])
def test_released_layout_shapes(tiny_audio_vae_config, randomize, mel_frames):
    encoder, decoder = _models(tiny_audio_vae_config(), randomize)
    latent = encoder(torch.randn(2, 2, mel_frames, 64))
    frames = (mel_frames - 1) // 4 + 1  # two causal halvings
    assert latent.shape == (2, 8, frames, 16)
    mel = decoder(latent)
    assert mel.shape == (2, 2, 4 * frames - 3, 64)
    assert torch.isfinite(mel).all()


def test_config_derived_sizes():
    cfg = AudioVAEConfig()
    assert (cfg.downsample_factor, cfg.latent_mel_bins, cfg.latent_features) == (4, 16, 128)
    assert cfg.latents_per_second == 25.0
    assert [cfg.latent_frames(t) for t in (1, 4, 5, 50)] == [1, 1, 2, 13]
    assert [cfg.decoded_frames(t) for t in (1, 2, 13)] == [1, 5, 49]


def test_mid_block_attention_and_attention_resolutions(tiny_audio_vae_config, randomize):
    # Nominal resolutions are 256, 128, 64 for the three levels: attention on the first and last only.
    config = tiny_audio_vae_config(mid_block_add_attention=True, attn_resolutions=[256, 64, 8])
    encoder, decoder = _models(config, randomize)
    enc_keys, dec_keys = set(encoder.state_dict()), set(decoder.state_dict())
    for keys in (enc_keys, dec_keys):
        assert {"mid.attn_1.q.weight", "mid.attn_1.k.bias", "mid.attn_1.v.weight", "mid.attn_1.proj_out.bias"} <= keys
    assert "down.0.attn.0.q.weight" in enc_keys and "down.2.attn.0.q.weight" in enc_keys
    assert not any(k.startswith("down.1.attn") for k in enc_keys)
    # Decoder levels have num_res_blocks + 1 blocks, each followed by attention where enabled.
    assert {"up.0.attn.0.q.weight", "up.0.attn.1.q.weight", "up.2.attn.1.proj_out.weight"} <= dec_keys
    assert not any(k.startswith("up.1.attn") for k in dec_keys)
    latent = encoder(torch.randn(1, 2, 21, 64))
    assert latent.shape == (1, 8, 6, 16)
    assert decoder(latent).shape == (1, 2, 21, 64)

    plain = audio_encoder_from_config(tiny_audio_vae_config())
    assert not any(".attn" in k for k in plain.state_dict())


def test_encoder_and_decoder_are_causal_in_time(tiny_audio_vae_config, randomize):
    encoder, decoder = _models(tiny_audio_vae_config(), randomize)
    mel = torch.randn(1, 2, 33, 64)
    changed = mel.clone()
    changed[:, :, 20:] = torch.randn_like(changed[:, :, 20:])
    a, b = encoder(mel), encoder(changed)
    # Mel frame 20 first reaches latent step ceil(20 / 4) = 5.
    assert torch.equal(a[:, :, :5], b[:, :, :5]) and not torch.equal(a[:, :, 5:], b[:, :, 5:])

    latent = torch.randn(1, 8, 9, 16)
    later = latent.clone()
    later[:, :, 6:] += 1.0
    x, y = decoder(latent), decoder(later)
    # Latent step 6 first shapes mel frame 4 * 6 - 3 = 21.
    assert torch.equal(x[:, :, :21], y[:, :, :21]) and not torch.equal(x[:, :, 21:], y[:, :, 21:])


def test_group_norm_without_causality(tiny_audio_vae_config, randomize):
    config = tiny_audio_vae_config(norm_type="group", causality_axis=None, ch=32)
    encoder, decoder = _models(config, randomize)
    assert "down.0.block.0.norm1.weight" in encoder.state_dict()
    latent = encoder(torch.randn(1, 2, 40, 64))
    assert latent.shape == (1, 8, 10, 16)
    assert decoder(latent).shape == (1, 2, 40, 64)  # no causal offset: 4T frames


def test_statistics_normalise_patchified_features(tiny_audio_vae_config, randomize):
    stats = randomize(audio_encoder_from_config(tiny_audio_vae_config())).per_channel_statistics
    latent = torch.randn(1, 8, 3, 16)
    # Feature c * 16 + m of the (B, T, 128) token layout scales latent[:, c, :, m].
    std, mean = stats.get_buffer("std-of-means"), stats.get_buffer("mean-of-means")
    tokens = latent.permute(0, 2, 1, 3).reshape(1, 3, 128)
    want = ((tokens - mean) / std).reshape(1, 3, 8, 16).permute(0, 2, 1, 3)
    assert torch.allclose(stats.normalize(latent), want)
    assert torch.allclose(stats.un_normalize(stats.normalize(latent)), latent, atol=1e-6)


def test_variant_round_trips_through_a_checkpoint(tiny_audio_vae_config, randomize, write_checkpoint, state_under):
    config = tiny_audio_vae_config(mid_block_add_attention=True, attn_resolutions=[64])
    encoder, decoder = _models(config, randomize)
    decoder.per_channel_statistics.load_state_dict(encoder.per_channel_statistics.state_dict())
    stats = "per_channel_statistics."
    tensors = {
        **state_under("audio_vae.encoder.", encoder, skip=stats),
        **state_under("audio_vae.decoder.", decoder, skip=stats),
        **state_under("audio_vae.per_channel_statistics.", encoder.per_channel_statistics),
    }
    path = write_checkpoint(config, tensors)
    loaded_encoder = build_model(AUDIO_ENCODER, path, device="cpu")
    loaded_decoder = build_model(AUDIO_DECODER, path, device="cpu")
    assert isinstance(loaded_encoder, AudioEncoder) and isinstance(loaded_decoder, AudioDecoder)
    mel = torch.randn(1, 2, 17, 64)
    latent = encoder(mel)
    assert torch.equal(loaded_encoder(mel), latent)
    assert torch.equal(loaded_decoder(latent), decoder(latent))


@pytest.mark.parametrize(
    ("shape", "match"),
    [
        ((1, 1, 20, 64), "expects 2 channels"),
        ((1, 2, 20, 80), "expects 64 mel bins"),
        ((2, 20, 64), "4-D tensor"),
    ],
)
def test_encoder_rejects_bad_mels(tiny_audio_vae_config, shape, match):
    encoder = audio_encoder_from_config(tiny_audio_vae_config())
    with pytest.raises(ValueError, match=match):
        encoder(torch.zeros(shape))


@pytest.mark.parametrize(
    ("shape", "match"), [((1, 4, 5, 16), "expects 8 channels"), ((1, 8, 5, 64), "expects 16 latent mel bins")]
)
def test_decoder_rejects_bad_latents(tiny_audio_vae_config, shape, match):
    decoder = audio_decoder_from_config(tiny_audio_vae_config())
    with pytest.raises(ValueError, match=match):
        decoder(torch.zeros(shape))


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"norm_type": "batch"}, "norm_type 'batch'"),
        ({"causality_axis": "time"}, "causality_axis 'time'"),
        ({"norm_type": "group"}, "needs causality_axis 'none'"),
        ({"mel_bins": 62}, "divisible by the downsampling factor 4"),
        ({"ch_mult": []}, "ch_mult"),
        ({"attn_type": "linear"}, "attn_type 'linear'"),
    ],
)
def test_bad_configs_are_named(tiny_audio_vae_config, overrides, match):
    with pytest.raises(CheckpointError, match=match):
        audio_encoder_from_config(tiny_audio_vae_config(**overrides))


def test_missing_section_is_reported():
    with pytest.raises(CheckpointError, match="audio_vae"):
        audio_decoder_from_config({"vae": {}})
