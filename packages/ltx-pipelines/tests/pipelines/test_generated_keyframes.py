"""Generated keyframes on the prompt pipelines (`generated_keyframes=` / `--num-generated-keyframes`): where a
count puts the slots, that slots never move the target's noise, that they reach stage 1 only and come back as
`stage_1.video_generated_keyframes`, and that bad requests are refused before anything loads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from ltx_core.conditioning import VideoConditionByKeyframeIndex, VideoGeneratedKeyframeSlots
from ltx_core.loader import ModelFiles, checkpoint_config, read_checkpoint_config
from ltx_core.model.video_vae.spec import VIDEO_ENCODER
from ltx_core.model.video_vae.vae_class import video_scale_factors
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines import distilled, ti2vid_one_stage, ti2vid_two_stages
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.denoising_stage import SeededNoise, run_denoising_stage
from ltx_pipelines.engine.requests import (
    STAGE_1_KEYFRAMES,
    GuidanceRequest,
    VideoRequest,
    evenly_spaced_keyframe_positions,
    generated_keyframe_positions,
)
from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline
from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline
from ltx_pipelines.ti2vid_two_stages_hq import TI2VidTwoStagesHQPipeline

PROMPT = "A red fox runs through fresh snow at dawn"


# ---- where a count puts the slots ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "frames", "want"),
    [
        # linspace(0, 16, 3) = 0, 8, 16: the middle frame.
        (1, 17, (8,)),
        # linspace(0, 16, 4) = 0, 5.33, 10.67, 16 -> rounded 5, 11.
        (2, 17, (5, 11)),
        # linspace(0, 8, 4) = 0, 2.67, 5.33, 8 -> 3, 5.
        (2, 9, (3, 5)),
        # linspace(0, 120, 7): steps of 20.
        (5, 121, (20, 40, 60, 80, 100)),
        # linspace(0, 16, 17): every interior frame, steps of 1.
        (15, 17, tuple(range(1, 16))),
        # linspace(0, 24, 17): steps of 1.5; the halves round to the even neighbour (1.5 -> 2, 4.5 -> 4, 7.5 -> 8).
        (15, 25, (2, 3, 4, 6, 8, 9, 10, 12, 14, 15, 16, 18, 20, 21, 22)),
        (0, 17, ()),
    ],
)
def test_a_count_gives_evenly_spaced_interior_frames(count, frames, want):
    assert evenly_spaced_keyframe_positions(count, frames) == want
    assert generated_keyframe_positions(count, frames) == want


def test_explicit_frames_are_taken_as_given():
    assert generated_keyframe_positions([1, 8, 16], 17) == (1, 8, 16)
    assert generated_keyframe_positions(torch.tensor([4, 12]), 17) == (4, 12)
    assert generated_keyframe_positions([], 17) == ()


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (-1, r"generated_keyframes -1 is not accepted: a 17-frame clip takes 0 to 15 evenly spaced interior"),
        (16, r"generated_keyframes 16 is not accepted: a 17-frame clip takes 0 to 15"),
        ([8, 4], r"generated_keyframes \[8, 4\] is not accepted: .*strictly increasing and lie in \[1, 17\)"),
        ([4, 4], r"generated_keyframes \[4, 4\] is not accepted"),
        ([0, 8], r"generated_keyframes \[0, 8\] is not accepted"),
        ([8, 17], r"generated_keyframes \[8, 17\] is not accepted"),
        (True, r"must be a count or a sequence of frame indices, got True"),
    ],
)
def test_bad_requests_are_refused_naming_what_is_accepted(request_, message):
    with pytest.raises(ValueError, match=message):
        generated_keyframe_positions(request_, 17)


# ---- slots in a stage --------------------------------------------------------------------------------------


@dataclass
class RecordedNoise:
    """A seeded source that keeps each draw by name."""

    seed: int
    draws: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._source = SeededNoise(self.seed)

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        self.draws[name] = self._source(name, shape, device=device, dtype=dtype)
        return self.draws[name]


def _unchanged(denoiser, sigmas, video, audio, progress=True):
    """A loop that returns the noised states as they are, so the result is the initial noise."""
    return video, audio


def _stage(conditionings, noise):
    # 17 frames of 64x64: a 3 x 2 x 2 latent grid, 12 target tokens of 4 per latent frame.
    shape = VideoPixelShape(1, 17, 64, 64, 24.0)
    return run_denoising_stage(
        None, shape, torch.tensor([1.0, 0.0]), noise, "stage_1", torch.device("cpu"), torch.float32,  # type: ignore[arg-type]
        conditionings=conditionings, with_audio=False, loop=_unchanged, progress=False,
    )  # fmt: skip


def test_appended_slots_leave_the_target_noise_unchanged_and_come_back_as_keyframes():
    plain_noise, slot_noise = RecordedNoise(7), RecordedNoise(7)
    plain = _stage([], plain_noise)
    with_slots = _stage([VideoGeneratedKeyframeSlots((5, 11))], slot_noise)
    # Same seed at batch 1: the slots' 2 x 4 tokens come after the 12 target tokens of the one draw, so the
    # target's noise is the first 12 tokens of it, exactly the draw without slots.
    assert plain_noise.draws["stage_1.video"].shape == (1, 12, 128)
    assert slot_noise.draws["stage_1.video"].shape == (1, 20, 128)
    torch.testing.assert_close(slot_noise.draws["stage_1.video"][:, :12], plain_noise.draws["stage_1.video"])
    torch.testing.assert_close(with_slots.video_latent, plain.video_latent, rtol=0, atol=0)
    assert plain.video_generated_keyframes is None
    keyframes = with_slots.video_generated_keyframes
    assert keyframes is not None and keyframes.shape == (1, 128, 2, 2, 2)
    # At sigma 1 from zeros a slot is its noise: frame-major tokens, channels last.
    torch.testing.assert_close(
        keyframes.permute(0, 2, 3, 4, 1).reshape(1, 8, 128), slot_noise.draws["stage_1.video"][:, 12:]
    )
    assert set(with_slots.latents) == {"stage_1.video_latent", STAGE_1_KEYFRAMES}


def test_slots_before_an_appended_keyframe_are_read_from_their_own_tokens():
    # DFR's stage 2 puts the IC-LoRA reference after the slots: the slots' tokens sit between the target's 12
    # and the keyframe's 4, in the order the items were given (which fixes the noise layout).
    noise = RecordedNoise(3)
    keyframe = VideoConditionByKeyframeIndex(torch.zeros(1, 128, 1, 2, 2), 8, 1.0)
    result = _stage([VideoGeneratedKeyframeSlots((5,)), keyframe], noise)
    draw = noise.draws["stage_1.video"]
    assert draw.shape == (1, 12 + 4 + 4, 128)
    keyframes = result.video_generated_keyframes
    assert keyframes is not None and keyframes.shape == (1, 128, 1, 2, 2)
    torch.testing.assert_close(keyframes.permute(0, 2, 3, 4, 1).reshape(1, 4, 128), draw[:, 12:16])


def test_a_stage_takes_one_slots_item():
    items = [VideoGeneratedKeyframeSlots((5,)), VideoGeneratedKeyframeSlots((9,))]
    with pytest.raises(ValueError, match=r"one keyframe slots item, got 2"):
        _stage(items, RecordedNoise(1))


# ---- the pipelines (Python API) ------------------------------------------------------------------------------


def _transformer_file(path: Path) -> Path:
    """A transformer file whose config has no keyframe embedding (nothing else is read before refusing)."""
    save_file(
        {"model.diffusion_model.proj_out.weight": torch.zeros(2, 2)},
        path,
        metadata={"config": json.dumps({"transformer": {"num_layers": 1}}), "model_version": "2.3.0"},
    )
    return path


@pytest.mark.parametrize(
    "make",
    [
        lambda c, d: DistilledPipeline(c, d / "up.safetensors", d / "gemma"),
        lambda c, d: TI2VidOneStagePipeline(c, d / "gemma"),
        lambda c, d: TI2VidTwoStagesPipeline(c, d / "up.safetensors", d / "gemma", distilled_lora=None),
        lambda c, d: TI2VidTwoStagesHQPipeline(c, d / "up.safetensors", d / "gemma", distilled_lora=None),
    ],
    ids=["distilled", "one-stage", "two-stages", "hq"],
)
def test_a_transformer_without_the_keyframe_embedding_is_refused_before_loading(tmp_path, make):
    (tmp_path / "gemma").mkdir()  # exists (checked when the pipeline is made), but holds no Gemma
    pipeline = make(_transformer_file(tmp_path / "t.safetensors"), tmp_path)
    # Gemma is empty and the upsampler does not exist: the refusal comes before either is read.
    with pytest.raises(ValueError, match=r"generated keyframes \(2\) cannot run on .*lacks use_keyframes_abs_pos_emb"):
        _generate(pipeline, generated_keyframes=2)
    with pytest.raises(ValueError, match=r"generated keyframes \(\[4, 8\]\) cannot run on"):
        _generate(pipeline, generated_keyframes=[4, 8])


def _generate(pipeline: Any, **video: Any) -> Any:
    """A prompt call of 17 frames at 128x128."""
    size = dict(height=128, width=128, num_frames=17, frame_rate=24.0)
    return pipeline.generate(PROMPT, seed=1, video=VideoRequest(**size, **video))


def _contexts(files: ModelFiles, seed: int) -> TextContexts:
    """Random contexts of the widths the transformer's cross-attention takes (no Gemma in these runs)."""
    transformer = read_checkpoint_config(files, "transformer")
    g = torch.Generator().manual_seed(seed)
    video = torch.randn(1, 16, transformer["cross_attention_dim"], generator=g)
    audio = torch.randn(1, 16, transformer["audio_cross_attention_dim"], generator=g)
    return TextContexts(video=video, audio=audio, mask=torch.ones(1, 16, dtype=torch.int64))


@dataclass(frozen=True)
class LatentGrid:
    """The video latent of `frames` x `height` x `width` pixels under the files' VAE: (1, C, F, H, W), with one
    token per latent cell (the patch size is 1) of the transformer's input width C."""

    channels: int
    frames: int
    height: int
    width: int

    @classmethod
    def of(cls, files: ModelFiles, frames: int, height: int, width: int) -> LatentGrid:
        scale = video_scale_factors(checkpoint_config(VIDEO_ENCODER, files)["vae"])
        channels = read_checkpoint_config(files, "transformer").get("in_channels", 128)
        return cls(channels, (frames - 1) // scale.time + 1, height // scale.height, width // scale.width)

    @property
    def frame_tokens(self) -> int:
        return self.height * self.width

    @property
    def tokens(self) -> int:
        return self.frames * self.frame_tokens

    def latent(self, frames: int | None = None) -> tuple[int, ...]:
        return (1, self.channels, self.frames if frames is None else frames, self.height, self.width)


CPU = {"device": "cpu", "dtype": torch.float32, "progress": False}
# 9 frames at 128x128 (stage 1 at half size); two slots: linspace(0, 8, 4) -> frames 3 and 5.
CALL = {"height": 128, "width": 128, "num_frames": 9, "frame_rate": 24.0}


def _two_stage_grids(files: ModelFiles) -> tuple[LatentGrid, LatentGrid]:
    h, w, f = CALL["height"], CALL["width"], CALL["num_frames"]
    return LatentGrid.of(files, f, h // 2, w // 2), LatentGrid.of(files, f, h, w)


@pytest.mark.golden
def test_distilled_slots_reach_stage_1_only(golden_ltx25_dfr_files, golden_ltx25_upsampler):
    files = golden_ltx25_dfr_files
    half, full = _two_stage_grids(files)
    pipeline = DistilledPipeline(files, golden_ltx25_upsampler, None, **CPU)
    contexts = _contexts(files, 3)
    noise = RecordedNoise(5)
    final = pipeline.latents_from_contexts(contexts, noise=noise, video=VideoRequest(generated_keyframes=2, **CALL))
    assert noise.draws["stage_1.video"].shape == (1, half.tokens + 2 * half.frame_tokens, half.channels)
    assert noise.draws["stage_2.video"].shape == (1, full.tokens, full.channels)
    assert final.stage_latents[STAGE_1_KEYFRAMES].shape == half.latent(2)
    assert final.stage_latents["stage_1.video_latent"].shape == half.latent()
    assert final.video is not None and final.video.shape == full.latent()
    assert not any(name.startswith("stage_2") and "keyframes" in name for name in final.stage_latents)
    plain = pipeline.latents_from_contexts(contexts, noise=RecordedNoise(5), video=VideoRequest(**CALL))
    assert STAGE_1_KEYFRAMES not in plain.stage_latents
    # The slots take part in stage 1's attention: the result differs from the run without them.
    assert not torch.equal(final.video, plain.video)


@pytest.mark.golden
@pytest.mark.parametrize(
    "pipeline_class", [TI2VidTwoStagesPipeline, TI2VidTwoStagesHQPipeline], ids=["euler", "hq-res2s"]
)
def test_guided_two_stage_slots_reach_stage_1_only(golden_ltx25_dfr_files, golden_ltx25_upsampler, pipeline_class):
    files = golden_ltx25_dfr_files
    half, full = _two_stage_grids(files)
    pipeline = pipeline_class(files, golden_ltx25_upsampler, None, distilled_lora=None, **CPU)
    noise = RecordedNoise(5)
    final = pipeline.latents_from_contexts(
        _contexts(files, 3), _contexts(files, 4), noise=noise,
        guidance=GuidanceRequest(num_inference_steps=2), video=VideoRequest(generated_keyframes=[2, 6], **CALL),
    )  # fmt: skip
    assert noise.draws["stage_1.video"].shape == (1, half.tokens + 2 * half.frame_tokens, half.channels)
    assert noise.draws["stage_2.video"].shape == (1, full.tokens, full.channels)
    assert final.stage_latents[STAGE_1_KEYFRAMES].shape == half.latent(2)
    assert final.video is not None and final.video.shape == full.latent()


@pytest.mark.golden
def test_one_stage_slots_are_kept_as_stage_1_keyframes(golden_ltx25_dfr_files):
    files = golden_ltx25_dfr_files
    # One stage at 64x64, 9 frames; one slot at frame 4 (linspace(0, 8, 3)).
    grid = LatentGrid.of(files, 9, 64, 64)
    pipeline = TI2VidOneStagePipeline(files, None, **CPU)
    noise = RecordedNoise(5)
    final = pipeline.latents_from_contexts(
        _contexts(files, 3), _contexts(files, 4), noise=noise, guidance=GuidanceRequest(num_inference_steps=1),
        video=VideoRequest(generated_keyframes=1, height=64, width=64, num_frames=9, frame_rate=24.0),
    )  # fmt: skip
    assert noise.draws["stage_1.video"].shape == (1, grid.tokens + grid.frame_tokens, grid.channels)
    assert final.stage_latents[STAGE_1_KEYFRAMES].shape == grid.latent(1)
    assert final.video is not None and final.video.shape == grid.latent()


# ---- the command lines ---------------------------------------------------------------------------------------


def _argv(output: Path, *extra: str) -> list[str]:
    return ["--demo", "--prompt", PROMPT, "--output-path", str(output), "--device", "cpu", *extra]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--num-generated-keyframes", "-2"], "--num-generated-keyframes -2 is not accepted: it must be 0 (off)"),
        (
            ["--num-frames", "9", "--num-generated-keyframes", "8"],
            "--num-generated-keyframes: generated_keyframes 8 is not accepted: a 9-frame clip takes 0 to 7",
        ),
    ],
)
@pytest.mark.parametrize("module", [distilled, ti2vid_one_stage, ti2vid_two_stages], ids=lambda m: m.__name__)
def test_bad_counts_are_refused_before_anything_is_built(tmp_path, capsys, monkeypatch, module, extra, message):
    # An empty cache: the demo models would have to be built, but the flags are refused first.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(SystemExit) as exit_:
        module.COMMAND.parse(_argv(tmp_path / "out.mp4", *extra))
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "empty-cache").exists()


def test_the_ltx23_demo_transformer_is_refused_before_loading(demo_cache_home, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    output = tmp_path / "out.mp4"
    with pytest.raises(SystemExit) as exit_:
        distilled.main(_argv(output, "--num-generated-keyframes", "1"))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--num-generated-keyframes 1 cannot run on" in err
    assert "lacks use_keyframes_abs_pos_embedding" in err
    assert not output.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "extra"),
    [(distilled, []), (ti2vid_two_stages, ["--num-inference-steps", "1"])],
    ids=["distilled", "ti2vid_two_stages"],
)
def test_ltx25_demo_runs_with_generated_keyframes(ltx25_demo_home, tmp_path, monkeypatch, module, extra):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    output = tmp_path / "fox.mp4"
    argv = _argv(output, "--demo-family", "ltx-2.5", "--height", "64", "--width", "64", "--num-frames", "9")
    assert module.main([*argv, *extra, "--num-generated-keyframes", "2"]) == 0
    parameters = json.loads(output.with_suffix(".json").read_text())["parameters"]
    assert parameters["num_generated_keyframes"] == 2


# ---- over several devices ----------------------------------------------------------------------------------


def test_slot_tokens_shard_over_ranks_like_any_other_token():
    """Sequence parallel cuts the video stream, slots included, into equal rank slices (padded): each slot token
    keeps its latent, its one-frame timing and its keyframe mark on whichever rank holds it, and the padding is
    unmarked. (A 2-rank gloo CLI run of the 2.5 demo with 2 slots wrote the single-process video exactly; it is
    too slow for the suite, so the slicing is checked here.)"""
    from ltx_core.latent_tools import VideoLatentTools
    from ltx_core.model.transformer import Modality
    from ltx_core.multigpu.comm import padded_length
    from ltx_core.multigpu.sequence_parallel import StreamShard, _shard_modality

    tools = VideoLatentTools.from_pixel_shape(VideoPixelShape(1, 17, 64, 64, 24.0))
    state = VideoGeneratedKeyframeSlots((5, 11)).apply_to(tools.create_initial_state(), tools)
    state = replace(state, latent=torch.randn(state.latent.shape, generator=torch.Generator().manual_seed(0)))
    tokens = state.latent.shape[1]  # 12 target tokens + 2 slots of 4
    assert tokens == 20 and state.keyframes_mask is not None
    video = Modality(
        latent=state.latent, timesteps=state.denoise_mask, sigma=torch.ones(1), positions=state.positions,
        context=torch.zeros(1, 1, 4), keyframes_mask=state.keyframes_mask,
    )  # fmt: skip
    world = 3  # 20 tokens pad to 21: 7 per rank, the slots split over ranks 1 and 2
    shards = [
        _shard_modality(video, StreamShard(tokens=tokens, padded=padded_length(tokens, world), world=world, rank=r))
        for r in range(world)
    ]
    latent = torch.cat([s.latent for s in shards], dim=1)
    positions = torch.cat([s.positions for s in shards], dim=2)
    marks = torch.cat([s.keyframes_mask for s in shards if s.keyframes_mask is not None], dim=1)
    assert latent.shape[1] == 21
    torch.testing.assert_close(latent[:, :tokens], state.latent, rtol=0, atol=0)
    torch.testing.assert_close(positions[:, :, :tokens], state.positions, rtol=0, atol=0)
    torch.testing.assert_close(marks[:, :tokens], state.keyframes_mask.reshape(1, tokens, 1), rtol=0, atol=0)
    assert marks[0, 12:tokens].eq(1).all() and marks[0, tokens:].eq(0).all()
