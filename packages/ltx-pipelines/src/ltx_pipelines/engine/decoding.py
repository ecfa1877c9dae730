"""The decode step: a run's final latents (`FinalLatents`) into frames and a waveform.

It sits between generating (which returns the latents as a value) and writing (which only encodes
decoded data and never builds a model). The video decoder and the audio decoder + vocoder are built
here, used, and freed before this returns: the frames come back decoded, as (f, H, W, 3) float chunks
in [0, 1] on the CPU, the form the decoder gives them in (tile band by tile band).

The multi-GPU decode is a variant of the same step (`distributed=True`): the tiles are spread over the
ranks of the process group and blended on rank 0, which gets the frames; the other ranks get none.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ltx_core.loader.model_files import ModelSource
from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
from ltx_core.model.video_vae import DiffusionVideoDecoder
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_pipelines.engine.audio_output import AudioGeneration
from ltx_pipelines.engine.final_latents import FinalLatents, Waveform
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.model_loading import Placement, loaded, release, video_decoder_spec_of
from ltx_pipelines.engine.noise_sources import NoiseSource, fork_noise
from ltx_pipelines.engine.stage_blocks import decode_audio_waveform, decode_video_frames, decoder_noise


def decode_waveform(final: FinalLatents) -> Waveform | None:
    """The run's sound: the shipped waveform when the run has one, else the audio latent decoded (the
    vocoder always runs in float32); None for a run without audio."""
    if final.shipped_audio is not None:
        return final.shipped_audio
    if final.audio is None:
        return None
    with (
        loaded(AUDIO_DECODER, final.checkpoint, final.placement) as audio_decoder,
        loaded(VOCODER, final.checkpoint, final.placement, dtype=torch.float32) as vocoder,
    ):
        samples = decode_audio_waveform(audio_decoder, vocoder, final.audio)
        return Waveform(samples, int(vocoder.output_sample_rate))


def video_frame_chunks(
    checkpoint: ModelSource,
    placement: Placement,
    latent: torch.Tensor,
    tiling: TilingConfig | None,
    noise: NoiseSource,
    *,
    distributed: bool = False,
) -> Iterator[torch.Tensor]:
    """(f, H, W, 3) float frame chunks as the decoder gives them, drawing the decoder's noise from `noise`;
    the decoder is built when the first chunk is asked for and freed when the iteration ends."""
    decoder = None
    spec = video_decoder_spec_of(checkpoint)  # the LTX-2.5 diffusion decoder or the convolutional one
    try:
        decoder = placement.build(spec, checkpoint, dtype=placement.dtype, device=placement.device)
        if not distributed:
            yield from decode_video_frames(decoder, latent, tiling, noise)
            return
        from ltx_core.model.video_vae.decoder import to_rgb_frames
        from ltx_core.multigpu import distributed_decode
        from ltx_core.no_grad_iteration import no_grad_items

        if isinstance(decoder, DiffusionVideoDecoder):
            # Every rank runs stages 1-3 and draws the canvas noise (`noise` is forked alike on every rank).
            if tiling is None:
                tiling = distributed_decode.agreed_diffusion_tiling(decoder, latent)
            chunks = distributed_decode.decode_diffusion_tiled_distributed(decoder, latent, tiling, noise)
        else:
            # Every rank draws the same per-tile noise, in tile order, as the single-process decode does.
            tile_noise = decoder_noise(decoder, latent, tiling, noise)
            chunks = distributed_decode.decode_tiled_distributed(decoder, latent, tiling, noise=tile_noise)
        for chunk in no_grad_items(chunks):
            yield to_rgb_frames(chunk)
    finally:
        release(decoder)


def decode_video_generation(final: FinalLatents, *, distributed: bool = False) -> Generation:
    """The decoded video and its sound. `distributed`: decode tile-parallel over the process group (every
    rank must call it; rank 0 gets the frames, the others an empty tuple)."""
    if final.video is None:
        raise ValueError("these latents hold no video (an audio-only run): decode them with decode_audio_generation")
    waveform = decode_waveform(final)
    chunks = video_frame_chunks(
        final.checkpoint, final.placement, final.video, final.tiling, fork_noise(final.noise), distributed=distributed
    )
    frames = tuple(chunk.detach().to("cpu") for chunk in chunks)
    shape = final.shape
    return Generation(
        frames=frames,
        num_frames=shape.frames,
        height=shape.height,
        width=shape.width,
        frame_rate=shape.fps,
        audio=None if waveform is None else waveform.samples,
        audio_sample_rate=None if waveform is None else waveform.sample_rate,
        prompt=final.prompt,
        latents=dict(final.stage_latents),
        tiling=final.tiling,
        final=final,
        model_files={"checkpoint": final.checkpoint},
    )


def decode_audio_generation(final: FinalLatents) -> AudioGeneration:
    """The decoded waveform of an audio-only run."""
    waveform = decode_waveform(final)
    if waveform is None:
        raise ValueError("these latents hold no audio")
    return AudioGeneration(
        audio=waveform.samples, sample_rate=waveform.sample_rate, prompt=final.prompt, latents=dict(final.stage_latents)
    )


def decode_latents(final: FinalLatents, *, distributed: bool = False) -> Generation | AudioGeneration:
    """A video run's `Generation`, or an audio-only run's `AudioGeneration`."""
    if final.video is None:
        return decode_audio_generation(final)
    return decode_video_generation(final, distributed=distributed)
