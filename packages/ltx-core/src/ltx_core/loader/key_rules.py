"""Named rule sets for the released LTX-2 file layouts.

The released single file holds every component under its own prefix; each rule set below selects
exactly one component's keys and maps them to that module's own key names.
"""

from __future__ import annotations

from ltx_core.loader.sd_ops import SDOps

TRANSFORMER_PREFIX = "model.diffusion_model."
VIDEO_CONNECTOR_PREFIX = "model.diffusion_model.video_embeddings_connector."
AUDIO_CONNECTOR_PREFIX = "model.diffusion_model.audio_embeddings_connector."
TEXT_PROJECTION_PREFIX = "text_embedding_projection."
VIDEO_VAE_PREFIX = "vae."
AUDIO_VAE_PREFIX = "audio_vae."
VOCODER_PREFIX = "vocoder."
COMFY_LORA_PREFIX = "diffusion_model."

# Both VAEs store the latent normalisation under per_channel_statistics; only these two entries are
# read (the file also carries `channel`, `mean-of-stds`, ... that no component uses).
_LATENT_STAT_NAMES = ("std-of-means", "mean-of-means")

TRANSFORMER_KEYS = (
    SDOps("transformer")
    .keeping(prefix=TRANSFORMER_PREFIX)
    .dropping(prefix=VIDEO_CONNECTOR_PREFIX)
    .dropping(prefix=AUDIO_CONNECTOR_PREFIX)
    .renaming_prefix(TRANSFORMER_PREFIX)
)

TEXT_EMBEDDINGS_KEYS = (
    SDOps("text_embeddings")
    .keeping(prefix=VIDEO_CONNECTOR_PREFIX)
    .keeping(prefix=AUDIO_CONNECTOR_PREFIX)
    .keeping(prefix=TEXT_PROJECTION_PREFIX)
    .renaming_prefix(VIDEO_CONNECTOR_PREFIX, "video_connector.")
    .renaming_prefix(AUDIO_CONNECTOR_PREFIX, "audio_connector.")
    .renaming_prefix(TEXT_PROJECTION_PREFIX, "feature_extractor.")
)


def _keeping_latent_stats(ops: SDOps, prefix: str) -> SDOps:
    for stat in _LATENT_STAT_NAMES:
        ops = ops.keeping(prefix=f"{prefix}per_channel_statistics.{stat}", suffix=stat)  # exact key
    return ops


def _vae_keys(name: str, vae_prefix: str, part: str) -> SDOps:
    ops = SDOps(name)
    # Released single file (`vae.encoder.*`) and split per-component files (`encoder.*`) alike.
    for prefix in (vae_prefix, ""):
        ops = _keeping_latent_stats(ops.keeping(prefix=f"{prefix}{part}."), prefix)
    return ops.renaming_prefix(f"{vae_prefix}{part}.").renaming_prefix(f"{part}.").renaming_prefix(vae_prefix)


def _latent_stats_keys(name: str, vae_prefix: str) -> SDOps:
    """Only the latent statistics of a VAE, as the bare keys of a `PerChannelStatistics` module."""
    ops = SDOps(name)
    for prefix in (vae_prefix, ""):
        ops = _keeping_latent_stats(ops, prefix)
    stats = "per_channel_statistics."
    return ops.renaming_prefix(f"{vae_prefix}{stats}").renaming_prefix(stats)


VIDEO_ENCODER_KEYS = _vae_keys("video_encoder", VIDEO_VAE_PREFIX, "encoder")
VIDEO_DECODER_KEYS = _vae_keys("video_decoder", VIDEO_VAE_PREFIX, "decoder")
VIDEO_LATENT_STATISTICS_KEYS = _latent_stats_keys("video_latent_statistics", VIDEO_VAE_PREFIX)
AUDIO_ENCODER_KEYS = _vae_keys("audio_encoder", AUDIO_VAE_PREFIX, "encoder")
AUDIO_DECODER_KEYS = _vae_keys("audio_decoder", AUDIO_VAE_PREFIX, "decoder")

VOCODER_KEYS = SDOps("vocoder").keeping(prefix=VOCODER_PREFIX).renaming_prefix(VOCODER_PREFIX)

# Separate upsampler files carry bare module keys.
UPSAMPLER_KEYS = SDOps("upsampler").keeping()

# LoRAs saved by the trainer (and ComfyUI) name transformer modules under `diffusion_model.`.
COMFY_LORA_KEYS = SDOps("comfy_lora").keeping(prefix=COMFY_LORA_PREFIX).renaming_prefix(COMFY_LORA_PREFIX)
