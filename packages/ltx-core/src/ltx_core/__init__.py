"""LTX-2 core: models, loaders and sampling components.

The names most programs need are importable from here (`from ltx_core import build_model,
VIDEO_DECODER`); they load on first use, so `import ltx_core` stays cheap. Build a model from a
released single-file checkpoint with its spec::

    decoder = build_model(VIDEO_DECODER, "ltx-2.3-22b-distilled-1.1.safetensors", dtype=torch.bfloat16)
    frames = next(decoder.decode_video(latent))  # (f, H, W, 3) in [0, 1]
"""

from __future__ import annotations

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    # loading
    "build_model": "ltx_core.loader",
    "ComponentSpec": "ltx_core.loader",
    "CheckpointError": "ltx_core.loader",
    "LoraSpec": "ltx_core.loader",
    "StateDictCache": "ltx_core.loader",
    "read_safetensors_header": "ltx_core.loader",
    # model specs and the classes they build
    "AV_TRANSFORMER": "ltx_core.model.transformer",
    "VIDEO_ONLY_TRANSFORMER": "ltx_core.model.transformer",
    "AUDIO_ONLY_TRANSFORMER": "ltx_core.model.transformer",
    "LTXModel": "ltx_core.model.transformer",
    "Modality": "ltx_core.model.transformer",
    "X0Model": "ltx_core.model.transformer",
    "VIDEO_ENCODER": "ltx_core.model.video_vae",
    "VIDEO_DECODER": "ltx_core.model.video_vae",
    "VideoEncoder": "ltx_core.model.video_vae",
    "VideoDecoder": "ltx_core.model.video_vae",
    "TilingConfig": "ltx_core.model.video_vae",
    "AUDIO_ENCODER": "ltx_core.model.audio_vae",
    "AUDIO_DECODER": "ltx_core.model.audio_vae",
    "VOCODER": "ltx_core.model.audio_vae",
    "encode_audio": "ltx_core.model.audio_vae",
    "decode_audio": "ltx_core.model.audio_vae",
    "LATENT_UPSAMPLER": "ltx_core.model.upsampler",
    "upsample_video_latent": "ltx_core.model.upsampler",
    # values
    "VideoPixelShape": "ltx_core.types",
    "VideoLatentShape": "ltx_core.types",
    "AudioLatentShape": "ltx_core.types",
    "default_device": "ltx_core.devices",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
