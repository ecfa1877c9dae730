"""The guided pipelines, driven through their context/noise seam, reproduce `fx_pipeline_guided`.

Every run of the fixture (here: one-stage, two-stage with the distilled LoRA, HQ res2s) is replayed
through `generate_from_contexts` - the code path the command line takes - from the stored positive
and negative contexts and the recorded draws: the pipeline generator's and, for res2s, the SDE
draws. Which pipeline, its LoRAs and strengths, steps, guidance and batch size all come from the
fixture's params; every stored intermediate and output is compared, and every stored draw must be
consumed exactly once, in the recorded order.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import euler_denoising_loop, res2s_denoising_loop
from ltx_core.loader import LoraSpec
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import ReplayedNoise
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.ti2vid_two_stages_hq import TI2VidTwoStagesHQPipeline

pytestmark = [pytest.mark.golden, pytest.mark.slow]

# The loop each `stage_<k>_sampler` value names.
SAMPLERS = {"euler": euler_denoising_loop, "res2s": res2s_denoising_loop}


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_pipeline_guided")


def _runs(fx) -> list[str]:
    runs = fx.params.get("runs") or sorted(k.split(".")[0] for k in fx.params if k.endswith(".pipeline"))
    assert runs, "the fixture lists no runs"
    return list(runs)


def _stages(p: dict[str, Any], run: str) -> list[str]:
    """`stage_1`, `stage_2`, ... as the run's params name them (`<run>.stage_<k>_sigmas`)."""
    prefix = f"{run}.stage_"
    numbers = sorted(int(k[len(prefix) :].split("_")[0]) for k in p if k.startswith(prefix) and k.endswith("_sigmas"))
    assert numbers, f"{run}: no stage_<k>_sigmas in the params"
    return [f"stage_{k}" for k in numbers]


def _guidance(params: dict[str, Any]) -> MultiModalGuiderParams:
    return MultiModalGuiderParams(**{**params, "stg_blocks": tuple(params["stg_blocks"])})


def _contexts(fx, prefix: str) -> TextContexts:
    video, audio = fx[f"{prefix}video_context"], fx[f"{prefix}audio_context"]
    # The contexts are what the text stage delivers: padding already replaced by registers, all visible.
    return TextContexts(video=video, audio=audio, mask=torch.ones(video.shape[:2], dtype=torch.int64))


@dataclass(frozen=True)
class StageLoras:
    """The (file, strength) pairs fused into each stage's transformer, as the params list them."""

    per_stage: dict[str, list[tuple[str, float]]]

    def files(self) -> set[str]:
        return {f for pairs in self.per_stage.values() for f, _ in pairs}


def _stage_loras(p: dict[str, Any], run: str) -> StageLoras:
    return StageLoras({s: [(f, float(w)) for f, w in p[f"{run}.{s}_loras"]] for s in _stages(p, run)})


@dataclass(frozen=True)
class ModelFiles:
    checkpoint: Path
    upsampler: Path
    folder: Path
    """Where the LoRA files the params name are."""


def _build(p: dict[str, Any], run: str, files: ModelFiles, loras: StageLoras, **overrides: Any) -> Any:
    """The run's pipeline class, constructed with the files and settings of its params (and `overrides`)."""
    module, _, name = p[f"{run}.pipeline"].rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    stages = _stages(p, run)
    batch = {p[f"{run}.{s}_max_batch_size"] for s in stages}
    assert len(batch) == 1, f"{run}: one max_batch_size per pipeline, the params give {batch}"
    common: dict[str, Any] = {
        "gemma_root": None,  # contexts are given
        "device": "cpu",
        "dtype": torch.float32,
        "tiling": TilingConfig.from_dict(p["tiling_config"]),
        "max_batch_size": batch.pop(),
        "progress": False,
        **overrides,
    }
    checkpoint, upsampler, golden_dir = files.checkpoint, files.upsampler, files.folder
    if "stage_2" not in cls.stage_names:
        # One stage: every LoRA of the stage is a user LoRA.
        (pairs,) = loras.per_stage.values()
        return cls(checkpoint, loras=[LoraSpec(golden_dir / f, w) for f, w in pairs], **common)
    first, second = (loras.per_stage[s] for s in stages)
    shared = [pair for pair in first if pair in second]
    distilled = sorted(loras.files() - {f for f, _ in shared})
    assert len(distilled) <= 1, f"{run}: more than one LoRA differs between the stages: {distilled}"
    user = [LoraSpec(golden_dir / f, w) for f, w in shared]
    if issubclass(cls, TI2VidTwoStagesHQPipeline):
        strengths = [dict(loras.per_stage[s]).get(distilled[0], 0.0) if distilled else 0.0 for s in stages]
        return cls(
            checkpoint, upsampler, distilled_lora=golden_dir / distilled[0] if distilled else None,
            distilled_lora_strength_stage_1=strengths[0], distilled_lora_strength_stage_2=strengths[1],
            loras=user, **common,
        )  # fmt: skip
    strength = dict(second).get(distilled[0]) if distilled else None
    spec = LoraSpec(golden_dir / distilled[0], strength) if distilled else None
    return cls(checkpoint, upsampler, distilled_lora=spec, loras=user, **common)


def _check_configuration(p: dict[str, Any], run: str, pipeline: Any, loras: StageLoras) -> None:
    """What the params say of each stage is what the pipeline does: LoRAs, sampler, schedule."""
    stages = _stages(p, run)
    assert list(pipeline.stage_names) == stages, f"{run}: stages {pipeline.stage_names} vs params {stages}"
    fused = dict(zip(stages, pipeline.stage_loras()))
    for stage in stages:
        got = [(Path(spec.path).name, spec.strength) for spec in fused[stage] if spec.strength != 0.0]
        assert sorted(got) == sorted(loras.per_stage[stage]), f"{run}.{stage}: LoRAs {got}"
        want = SAMPLERS[p[f"{run}.{stage}_sampler"]]
        loop = pipeline.sampling_loop(stage, None)
        got_loop = getattr(loop, "func", loop)  # a functools.partial carries its settings
        assert got_loop is want, f"{run}.{stage}: sampler {got_loop.__name__}, params {want.__name__}"
    if f"{run}.res2s" in p:
        assert isinstance(pipeline, TI2VidTwoStagesHQPipeline)
        assert pipeline.sde_noise_seed == p[f"{run}.res2s"]["noise_seed"]


def _check_schedules(p: dict[str, Any], run: str, pipeline: Any) -> None:
    """The pipeline's own schedules (the run uses them) are the fixture's stage sigmas."""
    from ltx_core.components.schedulers import LTX2Scheduler, stage_2_distilled_sigmas

    settings = pipeline.guidance_settings(GuidanceRequest(num_inference_steps=p[f"{run}.num_inference_steps"]))
    if "stage_2" in pipeline.stage_names:
        half = VideoPixelShape(1, p["frames"], p["height"] // 2, p["width"] // 2, p["fps"])
        own = {"stage_1": pipeline.default_stage_1_sigmas(settings, half), "stage_2": stage_2_distilled_sigmas()}
    else:
        own = {"stage_1": LTX2Scheduler().sigmas(settings.num_inference_steps)}
    for stage, sigmas in own.items():
        want = torch.tensor(p[f"{run}.{stage}_sigmas"], dtype=torch.float32)
        torch.testing.assert_close(sigmas.float(), want, rtol=0, atol=1e-6, msg=f"{run}.{stage} sigmas")


@dataclass
class RunReport:
    compared: dict[str, float] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def _replay(fx, p, run: str, pipeline: Any, assert_golden_close) -> RunReport:
    noise = ReplayedNoise(fx.tensors, prefix=f"{run}.noise.")
    generation = pipeline.generate_from_contexts(
        _contexts(fx, ""),
        _contexts(fx, "negative_"),
        video=VideoRequest(height=p["height"], width=p["width"], num_frames=p["frames"], frame_rate=p["fps"]),
        noise=noise,
        guidance=GuidanceRequest(
            num_inference_steps=p[f"{run}.num_inference_steps"],
            video=_guidance(p[f"{run}.video_guider"]),
            audio=_guidance(p[f"{run}.audio_guider"]),
        ),
        sde_noise=noise,  # res2s draws replayed from the same store, by name
    )
    report = RunReport()

    def compare(name: str, got: torch.Tensor) -> None:
        key = f"{run}.{name}"
        if key not in fx:
            report.missing.append(key)
            return
        want = fx[key]
        report.compared[key] = float((got.double().cpu() - want.double()).abs().max())
        assert_golden_close(got, want, name=key)

    for name, latent in generation.latents.items():
        compare(name, latent)
    frames = torch.cat(list(generation.frames), dim=0)
    if f"{run}.video_frames" not in fx and f"{run}.video_frames_shape" in p:
        assert list(frames.shape) == p[f"{run}.video_frames_shape"], f"{run}: frames {tuple(frames.shape)}"
    else:
        compare("video_frames", frames)
    assert generation.audio_sample_rate == p[f"{run}.audio_sampling_rate"]
    compare("audio_waveform", generation.audio)

    outputs = [k for k, role in fx.roles.items() if role == "output" and k.startswith(f"{run}.")]
    unchecked = sorted(set(outputs) - set(report.compared))
    assert not unchecked, f"{run}: stored outputs the pipeline does not produce: {unchecked}"

    # Every stored draw served exactly once, in the recorded order (decoder draws last, if any).
    assert not noise.repeated(), f"{run}: draws served more than once: {noise.repeated()}"
    assert not noise.unused(), f"{run}: stored draws never used: {noise.unused()}"
    listed = p[f"{run}.generator_draws"]
    assert [d for d in noise.drawn if d in listed] == [d for d in listed if d in noise.stored], f"{run}: draw order"
    return report


@pytest.fixture(scope="module")
def files(golden_checkpoint, golden_spatial_upsampler, golden_dir) -> ModelFiles:
    return ModelFiles(golden_checkpoint, golden_spatial_upsampler, golden_dir)


@pytest.fixture(scope="module")
def replay_files(golden_pipeline_models, golden_dir) -> ModelFiles:
    """The single file and its upsampler, or the diffusers folder and upsampler folder of the same weights."""
    checkpoint, upsampler = golden_pipeline_models
    return ModelFiles(checkpoint, upsampler, golden_dir)


def test_guided_pipelines_replay_the_reference(fx, replay_files, assert_golden_close, golden_lacks):
    """Every run of the set in one test, so none is left out; a run's failure does not hide the others'.
    From the single file and from the diffusers folder (defaults, LoRA fusion, decoding all read from it)."""
    files = replay_files
    p = fx.params
    failures: list[str] = []
    missing: list[str] = []
    for run in _runs(fx):
        loras = _stage_loras(p, run)
        pipeline = _build(p, run, files, loras)
        try:
            _check_configuration(p, run, pipeline, loras)
            _check_schedules(p, run, pipeline)
            report = _replay(fx, p, run, pipeline, assert_golden_close)
        except AssertionError as e:
            failures.append(f"{run}: {e}")
            continue
        missing += report.missing
    assert not failures, "\n".join(failures)
    if missing:
        golden_lacks(f"{fx.path.name}: {missing} (every stored tensor matches)")


def test_fusing_the_lora_in_float32_is_an_explicit_option(fx, files, golden_lacks):
    """The pipeline option reaches the builder: `lora_fusion="float32"` gives other stage weights than
    the default (the reference's rule, which the replay above matches)."""
    p = fx.params
    run = next((r for r in _runs(fx) if _stage_loras(p, r).files()), None)
    if run is None:
        golden_lacks(f"{fx.path.name}: a run that fuses a LoRA")
    loras = _stage_loras(p, run)
    stage = next(s for s, pairs in loras.per_stage.items() if pairs)
    weights = {}
    for fusion in ("weight-dtype", "float32"):
        pipeline = _build(p, run, files, loras, lora_fusion=fusion)
        assert pipeline.lora_fusion.value == fusion
        stage_loras = dict(zip(pipeline.stage_names, pipeline.stage_loras()))
        with pipeline.transformer(stage_loras[stage]) as transformer:
            weights[fusion] = {k: v.clone() for k, v in transformer.state_dict().items()}
    diff = max(float((v - weights["weight-dtype"][k]).abs().max()) for k, v in weights["float32"].items())
    assert diff > 0, "float32 accumulation gave the same weights as the stored-dtype rule"
