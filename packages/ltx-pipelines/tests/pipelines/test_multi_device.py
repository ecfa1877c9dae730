"""`MultiDevice`, the value a pipeline takes as `parallel=`: bad settings are refused naming what is accepted,
and in one process (no process group) the pipeline built with it gives exactly the single-device latents
(the wrapped stage transformer is the sequence-parallel one over a world of 1; nothing is tiled)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx_core.loader import read_checkpoint_config
from ltx_core.multigpu import SequenceParallelTransformer
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.denoising_stage import SeededNoise
from ltx_pipelines.engine.multigpu import MultiDevice
from ltx_pipelines.engine.requests import VideoRequest


def _contexts(checkpoint: Path) -> TextContexts:
    transformer = read_checkpoint_config(checkpoint)["transformer"]
    g = torch.Generator().manual_seed(4)
    video = torch.randn(1, 64, transformer["cross_attention_dim"], generator=g)
    audio = torch.randn(1, 64, transformer["audio_cross_attention_dim"], generator=g)
    return TextContexts(video=video, audio=audio, mask=torch.ones(1, 64, dtype=torch.int64))


def test_bad_settings_are_refused_naming_what_is_accepted():
    with pytest.raises(ValueError, match=r"stage_2_parallel must be one of sequence, tiled, got 'ring'"):
        MultiDevice("ring")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stage_2_tile_overlap must be >= 0 latent cells, got -1"):
        MultiDevice("tiled", -1)


def test_in_one_process_the_pipeline_gives_the_single_device_latents(tiny_checkpoint, tiny_spatial_upsampler):
    common = {"device": "cpu", "dtype": torch.float32, "progress": False}
    single = DistilledPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, **common)
    parallel = DistilledPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, parallel=MultiDevice("tiled"), **common)
    with parallel.transformer(()) as model:
        assert isinstance(model, SequenceParallelTransformer)
    assert parallel.parallel is not None and parallel.parallel.refined_audio_is_usable  # a world of 1 is never tiled
    video = VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0)
    want = single.generate_from_contexts(_contexts(tiny_checkpoint), noise=SeededNoise(2), video=video)
    got = parallel.generate_from_contexts(_contexts(tiny_checkpoint), noise=SeededNoise(2), video=video)
    assert got.latents.keys() == want.latents.keys()
    for name, latent in want.latents.items():
        torch.testing.assert_close(got.latents[name], latent, rtol=0, atol=0, msg=name)
    frames = torch.cat(list(got.frames))
    torch.testing.assert_close(frames, torch.cat(list(want.frames)), rtol=0, atol=0)
