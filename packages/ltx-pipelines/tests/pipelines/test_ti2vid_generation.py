"""The three full-checkpoint pipelines end to end on the tiny model set built in-process.

Each `main()` writes an mp4 (checked with PyAV) and its sidecar; the Python API, driven through
`generate_from_contexts` with contexts encoded once, is reproducible from the seed, and the
LoRAs land in the stages they belong to. STG blocks come from the checkpoint's transformer config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import av
import pytest
import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.conditioning import FrozenModality, VideoConditionByLatentIndex
from ltx_core.loader import LoraFusionPrecision, LoraSpec, build_model, read_checkpoint_config, read_safetensors_header
from ltx_core.model.video_vae import VIDEO_ENCODER
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.text_encoders.gemma.prompt_encoding import context_row
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines import ti2vid_one_stage, ti2vid_two_stages, ti2vid_two_stages_hq
from ltx_pipelines.engine.denoising_stage import ImageCondition, SeededNoise, StageConditions
from ltx_pipelines.engine.generation import AudioGeneration
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.model_versions import LTX_2_3_HQ_DEFAULTS, defaults_for_checkpoint
from ltx_pipelines.engine.prompt_pipeline import encode_prompt
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline
from ltx_pipelines.ti2vid_two_stages import TI2VidTwoStagesPipeline
from ltx_pipelines.ti2vid_two_stages_hq import TI2VidTwoStagesHQPipeline

pytestmark = pytest.mark.slow

AAC_FRAME = 1024  # samples per AAC frame: the encoder pads the stream to whole frames
PROMPT = "a red fox trots through fresh snow, wind in the pines"
NEGATIVE = "blurry, static, muted audio"
PLACEMENT = Placement(torch.device("cpu"), torch.float32)


class Assets:
    """Model files for the runs: the tiny checkpoint, x2 upsampler and Gemma folder, a tiny LoRA over
    the transformer blocks' linears and a conditioning image."""

    def __init__(self, checkpoint: Path, upsampler: Path, gemma: Path, lora: Path, image: Path) -> None:
        self.checkpoint = checkpoint
        self.upsampler = upsampler
        self.gemma = gemma
        self.lora = lora
        self.image = image
        self.num_layers = int(read_checkpoint_config(checkpoint, "transformer")["num_layers"])

    def guidance(self) -> tuple[MultiModalGuiderParams, MultiModalGuiderParams]:
        """Every guidance term on (CFG, STG on the last block, modality isolation, rescale)."""
        last = (self.num_layers - 1,)
        video = MultiModalGuiderParams(
            cfg_scale=3.0, stg_scale=1.0, stg_blocks=last, rescale_scale=0.7, modality_scale=3.0
        )
        audio = MultiModalGuiderParams(
            cfg_scale=7.0, stg_scale=1.0, stg_blocks=last, rescale_scale=0.7, modality_scale=3.0
        )
        return video, audio

    def common_argv(self, out: Path) -> list[str]:
        block = str(self.num_layers - 1)
        return [
            "--checkpoint-path", str(self.checkpoint), "--gemma-root", str(self.gemma),
            "--prompt", PROMPT, "--negative-prompt", NEGATIVE, "--output-path", str(out),
            "--num-frames", "9", "--frame-rate", "24", "--num-inference-steps", "2", "--seed", "5",
            "--video-stg-blocks", block, "--audio-stg-blocks", block, "--max-batch-size", "4",
            "--device", "cpu", "--dtype", "float32", "--log-level", "WARNING",
        ]  # fmt: skip


@pytest.fixture(scope="module")
def assets(
    tmp_path_factory, tiny_checkpoint, tiny_spatial_upsampler, tiny_gemma_root, write_tiny_lora, write_test_image
) -> Assets:
    root = tmp_path_factory.mktemp("ti2vid_assets")
    return Assets(
        tiny_checkpoint,
        tiny_spatial_upsampler,
        tiny_gemma_root,
        write_tiny_lora(tiny_checkpoint, root / "distilled-lora.safetensors", rank=4, scale=0.5, seed=1234),
        write_test_image(root / "first-frame.png", width=160, height=96),
    )


@dataclass(frozen=True)
class PromptPair:
    """Contexts of the prompt and of the negative prompt, each with a batch of one."""

    positive: TextContexts
    negative: TextContexts


@pytest.fixture(scope="module")
def prompts(assets) -> PromptPair:
    """Both prompts from one Gemma batch, as the guided pipelines encode them."""
    contexts, _ = encode_prompt([PROMPT, NEGATIVE], gemma_root=assets.gemma, checkpoint=assets.checkpoint,
                                placement=PLACEMENT)  # fmt: skip
    return PromptPair(positive=context_row(contexts, 0), negative=context_row(contexts, 1))


def _read_mp4(path: Path) -> dict:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        audio = container.streams.audio[0]
        facts = {
            "size": (video.codec_context.width, video.codec_context.height),
            "fps": float(video.average_rate),
            "audio_codec": audio.codec_context.name,
            "audio_rate": audio.rate,
            "audio_channels": audio.codec_context.channels,
        }
        facts["frames"] = sum(1 for _ in container.decode(video))
    with av.open(str(path)) as container:
        facts["audio_samples"] = sum(frame.samples for frame in container.decode(container.streams.audio[0]))
    return facts


CLI_CASES = {
    "one_stage": (ti2vid_one_stage.main, 64, 96, False),
    "two_stages": (ti2vid_two_stages.main, 128, 128, True),
    "two_stages_hq": (ti2vid_two_stages_hq.main, 128, 128, True),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_main_writes_the_video_its_audio_and_a_complete_sidecar(assets, tmp_path, case):
    main, height, width, two_stage = CLI_CASES[case]
    out = tmp_path / "out" / f"{case}.mp4"
    argv = [*assets.common_argv(out), "--height", str(height), "--width", str(width)]
    if two_stage:
        argv += ["--spatial-upsampler-path", str(assets.upsampler), "--distilled-lora", str(assets.lora)]
    if case == "two_stages":
        argv += ["--image", str(assets.image), "0", "0.9"]
    assert main(argv) == 0

    facts = _read_mp4(out)
    assert facts["frames"] == 9 and facts["size"] == (width, height) and facts["fps"] == 24.0
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert facts["audio_codec"] == "aac" and facts["audio_channels"] == 2
    assert facts["audio_rate"] == sidecar["audio"]["sample_rate"]
    assert abs(facts["audio_samples"] - sidecar["audio"]["samples"]) <= AAC_FRAME

    assert sidecar["prompt"] == PROMPT and sidecar["output"] == out.name
    assert sidecar["video"] == {"num_frames": 9, "height": height, "width": width, "frame_rate": 24.0}
    params = sidecar["parameters"]
    assert params["seed"] == 5 and params["negative_prompt"] == NEGATIVE and params["num_inference_steps"] == 2
    assert params["video_stg_blocks"] == [assets.num_layers - 1] and params["max_batch_size"] == 4
    assert params["lora_fusion_precision"] == "weight-dtype"
    declared = read_safetensors_header(assets.checkpoint).metadata.get("model_version")
    if declared is not None:
        assert params["model_version"] == str(declared)
    files = sidecar["model_files"]
    assert files["checkpoint"]["name"] == assets.checkpoint.name and files["gemma_root"]["name"] == assets.gemma.name
    if two_stage:
        assert files["spatial_upsampler"]["name"] == assets.upsampler.name
        assert files["distilled_lora"]["name"] == assets.lora.name
    if case == "two_stages":
        # The CRF left unset is resolved from the checkpoint's generation.
        crf = defaults_for_checkpoint(assets.checkpoint).image_crf
        assert params["images"] == [{"path": str(assets.image), "frame_idx": 0, "strength": 0.9, "crf": crf}]
    if case == "two_stages_hq":
        assert (params["distilled_lora_strength_stage_1"], params["distilled_lora_strength_stage_2"]) == (0.25, 0.5)
        assert params["video_cfg_guidance_scale"] == LTX_2_3_HQ_DEFAULTS.video_guidance.cfg_scale
        assert params["video_rescale_scale"] == LTX_2_3_HQ_DEFAULTS.video_guidance.rescale_scale
    else:
        expected = defaults_for_checkpoint(assets.checkpoint).video_guidance
        assert params["video_rescale_scale"] == expected.rescale_scale


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_lora_fusion_flag_reaches_the_pipeline_and_the_sidecar(assets, tmp_path, case):
    """Parsed and built as `main` does (no generation): the flag sets how every stage fuses its LoRAs."""
    main, height, width, two_stage = CLI_CASES[case]
    command = main.__self__  # `main` is the module's `COMMAND.main`
    argv = [*assets.common_argv(tmp_path / "o.mp4"), "--height", str(height), "--width", str(width)]
    argv += ["--lora", str(assets.lora), "0.5", "--lora-fusion-precision", "float32"]
    if two_stage:
        argv += ["--spatial-upsampler-path", str(assets.upsampler), "--distilled-lora", str(assets.lora)]
    run = command.parse(argv)
    assert run.parameters["lora_fusion_precision"] == "float32"
    pipeline = command.build(run)
    assert pipeline.lora_fusion is LoraFusionPrecision.FLOAT32
    assert [Path(lora.path) for lora in pipeline.loras] == [assets.lora]


def test_the_prompt_pair_is_one_batch_positive_then_negative(assets, prompts):
    alone, _ = encode_prompt([PROMPT], gemma_root=assets.gemma, checkpoint=assets.checkpoint, placement=PLACEMENT)
    torch.testing.assert_close(prompts.positive.video, context_row(alone, 0).video, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(prompts.positive.audio, context_row(alone, 0).audio, atol=1e-5, rtol=1e-5)
    assert prompts.positive.video.shape[0] == prompts.negative.video.shape[0] == 1
    assert not torch.allclose(prompts.positive.video, prompts.negative.video)


def _run(pipeline, prompts, seed: int, height: int, width: int, guidance, images=(), **kwargs):
    video, audio = guidance
    return pipeline.generate_from_contexts(
        prompts.positive,
        prompts.negative,
        video=VideoRequest(height=height, width=width, num_frames=9, frame_rate=24.0, images=images),
        noise=SeededNoise(seed),
        guidance=GuidanceRequest(num_inference_steps=2, video=video, audio=audio),
        **kwargs,
    )


def _latent_dims(height: int, width: int, frames: int = 9) -> tuple[int, ...]:
    return VideoLatentShape.from_pixel_shape(VideoPixelShape(1, frames, height, width, 24.0)).dims


def _assert_same_run(a, b) -> None:
    assert a.latents.keys() == b.latents.keys()
    for name in a.latents:
        assert torch.equal(a.latents[name], b.latents[name]), name
    assert torch.equal(a.audio, b.audio)
    assert torch.equal(torch.cat(list(a.frames)), torch.cat(list(b.frames)))


def test_one_stage_is_reproducible_from_the_seed(assets, prompts):
    pipeline = TI2VidOneStagePipeline(assets.checkpoint, None, device="cpu", dtype=torch.float32, progress=False)
    first = _run(pipeline, prompts, 7, 64, 96, assets.guidance())
    again = _run(pipeline, prompts, 7, 64, 96, assets.guidance())
    other = _run(pipeline, prompts, 8, 64, 96, assets.guidance())
    _assert_same_run(first, again)
    assert set(first.latents) == {"stage_1.video_latent", "stage_1.audio_latent"}
    assert first.latents["stage_1.video_latent"].shape == _latent_dims(64, 96)
    assert not torch.equal(first.latents["stage_1.video_latent"], other.latents["stage_1.video_latent"])
    frames = torch.cat(list(other.frames))
    assert frames.shape == (9, 64, 96, 3) and other.audio.shape[0] == 2


def test_two_stages_reproducible_and_the_distilled_lora_only_changes_stage_2(assets, prompts):
    def pipeline(distilled_strength: float, loras=()) -> TI2VidTwoStagesPipeline:
        return TI2VidTwoStagesPipeline(
            assets.checkpoint,
            assets.upsampler,
            None,
            distilled_lora=LoraSpec(assets.lora, distilled_strength),
            loras=loras,
            device="cpu",
            dtype=torch.float32,
            max_batch_size=2,
            progress=False,
        )

    fused = _run(pipeline(1.0), prompts, 7, 64, 128, assets.guidance())
    again = _run(pipeline(1.0), prompts, 7, 64, 128, assets.guidance())
    _assert_same_run(fused, again)
    assert fused.latents["upsampled_video_latent"].shape == _latent_dims(64, 128)

    off = _run(pipeline(0.0), prompts, 7, 64, 128, assets.guidance())
    assert torch.equal(off.latents["stage_1.video_latent"], fused.latents["stage_1.video_latent"])
    assert not torch.allclose(off.latents["stage_2.video_latent"], fused.latents["stage_2.video_latent"])
    # The shipped audio is the stage-1 audio, which the distilled LoRA does not touch.
    assert torch.equal(off.audio, fused.audio)

    # A user LoRA goes into both stages.
    user = _run(pipeline(0.0, loras=(LoraSpec(assets.lora, 1.0),)), prompts, 7, 64, 128, assets.guidance())
    assert not torch.allclose(user.latents["stage_1.video_latent"], off.latents["stage_1.video_latent"])


def test_hq_is_reproducible_and_each_stage_gets_its_own_lora_strength(assets, prompts):
    def pipeline(stage_1: float, stage_2: float) -> TI2VidTwoStagesHQPipeline:
        return TI2VidTwoStagesHQPipeline(
            assets.checkpoint,
            assets.upsampler,
            None,
            distilled_lora=assets.lora,
            distilled_lora_strength_stage_1=stage_1,
            distilled_lora_strength_stage_2=stage_2,
            device="cpu",
            dtype=torch.float32,
            progress=False,
        )

    hq_guidance = (LTX_2_3_HQ_DEFAULTS.video_guidance, LTX_2_3_HQ_DEFAULTS.audio_guidance)
    default = _run(pipeline(0.25, 0.5), prompts, 7, 64, 128, hq_guidance)
    again = _run(pipeline(0.25, 0.5), prompts, 7, 64, 128, hq_guidance)
    _assert_same_run(default, again)

    stage_2_only = _run(pipeline(0.0, 0.5), prompts, 7, 64, 128, hq_guidance)
    none = _run(pipeline(0.0, 0.0), prompts, 7, 64, 128, hq_guidance)
    assert not torch.allclose(stage_2_only.latents["stage_1.video_latent"], default.latents["stage_1.video_latent"])
    assert torch.equal(stage_2_only.latents["stage_1.video_latent"], none.latents["stage_1.video_latent"])
    assert not torch.allclose(stage_2_only.latents["stage_2.video_latent"], none.latents["stage_2.video_latent"])


def test_stage_1_schedules(assets):
    """Non-HQ pipelines shift for the default 4096 tokens whatever the size (the reference's 30-step
    LTX-2.3 table starts 1.0, 0.995, 0.9896 and ends 0.3875, 0.2661, 0.1, 0); HQ shifts for the
    stage-1 latent's token count."""
    two = TI2VidTwoStagesPipeline(assets.checkpoint, assets.upsampler, None, distilled_lora=None)
    hq = TI2VidTwoStagesHQPipeline(assets.checkpoint, assets.upsampler, None, distilled_lora=None)
    settings = two.guidance_settings(GuidanceRequest(num_inference_steps=30))
    small = VideoPixelShape(1, 9, 64, 64, 24.0)
    large = VideoPixelShape(1, 121, 544, 960, 24.0)
    sigmas = two.default_stage_1_sigmas(settings, large)
    assert torch.equal(sigmas, two.default_stage_1_sigmas(settings, small))
    reference = [1.0, 0.995, 0.9896, 0.3875, 0.2661, 0.1, 0.0]
    torch.testing.assert_close(sigmas[[0, 1, 2, -4, -3, -2, -1]], torch.tensor(reference), atol=1e-4, rtol=0)

    hq_settings = hq.guidance_settings(GuidanceRequest())
    assert hq_settings.num_inference_steps == 15 and hq_settings.video.stg_scale == 0.0
    tokens = VideoLatentShape.from_pixel_shape(large).token_count
    assert tokens == 8160  # 544x960x121 in the reference's description
    hq_sigmas = hq.default_stage_1_sigmas(hq_settings, large)
    assert torch.equal(hq_sigmas, LTX2Scheduler().sigmas(15, tokens=tokens))
    assert not torch.equal(hq_sigmas, LTX2Scheduler().sigmas(15))
    assert (
        defaults_for_checkpoint(assets.checkpoint).num_inference_steps
        == two.guidance_settings(GuidanceRequest()).num_inference_steps
    )


CPU = {"device": "cpu", "dtype": torch.float32, "progress": False}
PIPELINES = {
    "one_stage": lambda a: TI2VidOneStagePipeline(a.checkpoint, None, **CPU),
    "two_stages": lambda a: TI2VidTwoStagesPipeline(
        a.checkpoint, a.upsampler, None, distilled_lora=LoraSpec(a.lora), **CPU
    ),
    "two_stages_hq": lambda a: TI2VidTwoStagesHQPipeline(a.checkpoint, a.upsampler, None, distilled_lora=a.lora, **CPU),
}


@pytest.mark.parametrize("case", sorted(PIPELINES))
def test_a_first_frame_image_at_full_strength_is_kept_in_every_stage(assets, prompts, case):
    """Strength 1 at frame 0 pins the first latent frame to the image's VAE latent, at each stage's size."""
    pipeline = PIPELINES[case](assets)
    # Stage 1 of the two-stage pipelines runs at half size; reflect-padded VAEs need >= 64 px there.
    height, width = 128, 128
    image = ImageCondition(frame_idx=0, strength=1.0, path=assets.image, crf=0)
    generation = _run(pipeline, prompts, 3, height, width, assets.guidance(), images=[image])
    encoder = build_model(VIDEO_ENCODER, assets.checkpoint, dtype=torch.float32, device="cpu")
    stages = {"stage_1": (height, width)} if case == "one_stage" else {"stage_1": (height // 2, width // 2)}
    if case != "one_stage":
        stages["stage_2"] = (height, width)
    for stage, (h, w) in stages.items():
        with torch.no_grad():
            expected = encoder(image.load(h, w))[:, :, :1]
        got = generation.latents[f"{stage}.video_latent"][:, :, :1]
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5, msg=f"{case} {stage}")
        # The rest of the video is generated, not copied.
        assert not torch.allclose(generation.latents[f"{stage}.video_latent"][:, :, 1:], expected)


def test_one_stage_stage_conditions_freeze_a_stream_and_condition_the_other(assets, prompts):
    pipeline = TI2VidOneStagePipeline(assets.checkpoint, None, device="cpu", dtype=torch.float32, progress=False)
    shape = VideoPixelShape(1, 9, 64, 96, 24.0)
    audio_dims = AudioLatentShape.from_video(shape).dims
    given_audio = torch.randn(audio_dims, generator=torch.Generator().manual_seed(3))
    b, c, _, h, w = _latent_dims(64, 96)
    first_latent = torch.randn(b, c, 1, h, w)
    conditions = StageConditions(
        video=(VideoConditionByLatentIndex(first_latent, 1.0, 0),),
        audio=(FrozenModality(),),
        initial_audio=given_audio,
    )
    video_guidance, _ = assets.guidance()
    run = _run(pipeline, prompts, 7, 64, 96, (video_guidance, MultiModalGuiderParams()), conditions=conditions)
    torch.testing.assert_close(run.latents["stage_1.audio_latent"], given_audio)
    torch.testing.assert_close(run.latents["stage_1.video_latent"][:, :, :1], first_latent)
    plain = _run(pipeline, prompts, 7, 64, 96, (video_guidance, MultiModalGuiderParams()))
    assert not torch.equal(plain.latents["stage_1.video_latent"], run.latents["stage_1.video_latent"])


def test_one_stage_without_the_video_stream_returns_audio_only(assets, prompts):
    pipeline = TI2VidOneStagePipeline(assets.checkpoint, None, device="cpu", dtype=torch.float32, progress=False)
    _, audio_guidance = assets.guidance()
    audio_only = replace(audio_guidance, modality_scale=1.0)
    run = _run(pipeline, prompts, 7, 64, 96, (MultiModalGuiderParams(), audio_only),
               conditions=StageConditions(with_video=False))  # fmt: skip
    assert isinstance(run, AudioGeneration) and set(run.latents) == {"stage_1.audio_latent"}
    assert run.audio.shape[0] == 2 and run.sample_rate > 0


def test_stage_conditions_are_checked_and_refused_by_pipelines_without_them(assets, prompts):
    with pytest.raises(ValueError, match="leave out both video and audio"):
        StageConditions(with_video=False, with_audio=False)
    with pytest.raises(ValueError, match="give audio items or an initial audio latent with with_audio=False"):
        StageConditions(audio=(FrozenModality(),), with_audio=False)
    pipeline = TI2VidTwoStagesPipeline(assets.checkpoint, assets.upsampler, None, distilled_lora=None, device="cpu")
    with pytest.raises(ValueError, match="takes no stage conditions"):
        _run(pipeline, prompts, 7, 128, 128, assets.guidance(), conditions=StageConditions())


def test_a_frozen_stream_keeps_its_positive_context_in_the_negative_pass(assets, prompts):
    """Video CFG runs a negative-prompt pass; the frozen audio takes its positive context there, so the
    negative prompt's audio context has no effect on the result."""
    pipeline = TI2VidOneStagePipeline(assets.checkpoint, None, device="cpu", dtype=torch.float32, progress=False)
    shape = VideoPixelShape(1, 9, 64, 96, 24.0)
    given_audio = torch.randn(AudioLatentShape.from_video(shape).dims, generator=torch.Generator().manual_seed(3))
    conditions = StageConditions(audio=(FrozenModality(),), initial_audio=given_audio)
    video_guidance, _ = assets.guidance()
    guidance = (video_guidance, MultiModalGuiderParams())
    negative = prompts.negative
    scrambled = replace(negative, audio=torch.randn_like(negative.audio))

    def video_latent(negative_contexts, stage_conditions):
        run = pipeline.generate_from_contexts(
            prompts.positive, negative_contexts, video=VideoRequest(height=64, width=96, num_frames=9, frame_rate=24.0),
            noise=SeededNoise(7), guidance=GuidanceRequest(num_inference_steps=2, video=guidance[0], audio=guidance[1]),
            conditions=stage_conditions,
        )  # fmt: skip
        return run.latents["stage_1.video_latent"]

    assert torch.equal(video_latent(negative, conditions), video_latent(scrambled, conditions))
    # A generated audio stream does take the negative audio context in that pass.
    assert not torch.equal(video_latent(negative, StageConditions()), video_latent(scrambled, StageConditions()))
