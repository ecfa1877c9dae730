"""The engine below the command line takes a diffusers model folder (or a `ModelFiles` value) wherever it
takes the single file: kind checks, model version and defaults, configs, model loading, prompt encoding,
image conditioning, LoRA fusion, the upsampler and decoding. Tiny demo models, converted in-process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.convert import single_file_to_diffusers
from ltx_core.loader import CheckpointError, LoraSpec, ModelFiles, read_checkpoint_config, read_safetensors_header
from ltx_core.loader.model_files import Component, model_files_of
from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
from ltx_pipelines import ti2vid_one_stage
from ltx_pipelines.engine.denoising_stage import ImageCondition
from ltx_pipelines.engine.generation import describe_model_files
from ltx_pipelines.engine.model_loading import Placement, check_checkpoint_kind, detect_checkpoint_kind, loaded
from ltx_pipelines.engine.model_versions import checkpoint_model_version, defaults_for_checkpoint
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline

pytestmark = pytest.mark.slow

PLACEMENT = Placement(torch.device("cpu"), torch.float32)


@pytest.fixture(scope="module")
def folder(tiny_checkpoint, tiny_spatial_upsampler, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("model_folder")
    return single_file_to_diffusers(tiny_checkpoint, root / "diffusers", upsamplers=[tiny_spatial_upsampler])


def test_checkpoint_kinds_of_folders(folder, tiny_checkpoint, tiny_gemma_root):
    want = read_safetensors_header(tiny_checkpoint).metadata["model_version"]
    for source in (folder, ModelFiles.from_diffusers(folder)):
        info = check_checkpoint_kind(source, "ltx_checkpoint")
        assert info.kind == "ltx_checkpoint" and "model folder" in info.description
        assert info.header.metadata["model_version"] == want
        assert info.header.path == folder
    single = check_checkpoint_kind(
        ModelFiles.single_file(tiny_checkpoint, gemma_root=tiny_gemma_root), "ltx_checkpoint"
    )
    assert "set of single-file model files" in single.description and single.header.metadata["model_version"] == want
    assert check_checkpoint_kind(folder / "latent_upsampler", "upsampler").kind == "upsampler"
    with pytest.raises(CheckpointError, match=r"is an LTX-2 model folder.*not a latent upsampler"):
        check_checkpoint_kind(folder, "upsampler")
    with pytest.raises(CheckpointError, match=r"is a latent upsampler.*not an LTX-2 single-file model checkpoint"):
        check_checkpoint_kind(folder / "latent_upsampler", "ltx_checkpoint")


def test_another_family_or_an_unknown_folder_is_refused_by_the_kind_check(folder, tmp_path):
    other = tmp_path / "flux"
    shutil.copytree(folder, other, ignore=shutil.ignore_patterns("*.safetensors"))
    index = json.loads((other / "model_index.json").read_text())
    (other / "model_index.json").write_text(json.dumps({**index, "_class_name": "FluxPipeline"}))
    with pytest.raises(CheckpointError, match=r"'FluxPipeline', not of LTX-2"):
        detect_checkpoint_kind(other)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="not a diffusers model folder"):
        detect_checkpoint_kind(empty)


def test_version_defaults_and_config_come_from_the_folder(folder, tiny_checkpoint):
    assert checkpoint_model_version(folder) == checkpoint_model_version(tiny_checkpoint) != ()
    assert checkpoint_model_version(ModelFiles.from_diffusers(folder)) == checkpoint_model_version(tiny_checkpoint)
    assert defaults_for_checkpoint(folder) == defaults_for_checkpoint(tiny_checkpoint)
    for section in ("transformer", "vae", "audio_vae", "vocoder"):
        want = read_checkpoint_config(tiny_checkpoint, section)
        got = read_checkpoint_config(folder, section)
        # The folder's translated config states some defaults the single file leaves out; every value the
        # single file states is the same.
        assert {k: got.get(k) for k in want} == want, section
    with pytest.raises(CheckpointError, match="no 'duration_head' section"):
        read_checkpoint_config(folder, "duration_head")


def test_model_files_of_is_the_one_resolution(folder, tiny_checkpoint):
    files = ModelFiles.from_diffusers(folder)
    assert model_files_of(files) is files
    assert model_files_of(folder).layout.value == "diffusers"
    assert model_files_of(tiny_checkpoint).layout.value == "single-file"
    # A component folder is not a model folder: the error names what a model folder holds.
    with pytest.raises(CheckpointError, match="has none of the component folders|not a diffusers model folder"):
        model_files_of(folder / "vocoder")


def test_a_missing_component_is_named_when_a_stage_loads_it(folder, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(folder, partial)
    shutil.rmtree(partial / "vocoder")
    named = r"audio_vae \(audio_vae/ \+ vocoder/ in the diffusers folder\)"
    with pytest.raises(CheckpointError, match=named), loaded(AUDIO_DECODER, partial, PLACEMENT):
        pass
    with pytest.raises(CheckpointError, match=r"audio_vae/ \+ vocoder/"), loaded(VOCODER, partial, PLACEMENT):
        pass


def test_run_records_describe_a_set_of_model_files(folder):
    described = describe_model_files({"checkpoint": ModelFiles.from_diffusers(folder), "upsampler": None})
    assert described["checkpoint"]["layout"] == "diffusers"
    assert set(described["checkpoint"]["components"]) >= {c.value for c in (Component.TRANSFORMER, Component.VIDEO_VAE)}


def test_a_pipeline_given_the_folder_generates_what_the_single_file_gives(
    folder, tiny_checkpoint, tiny_gemma_root, write_tiny_lora, write_test_image, tmp_path
):
    """From the prompt (Gemma + the folder's connectors), with a conditioning image (the folder's encoder and
    CRF default), a LoRA fused into the folder's transformer and decoding from its VAE and vocoder: the same
    frames and waveform as from the single file, bit for bit (the weights are bit-identical)."""
    lora = write_tiny_lora(tiny_checkpoint, tmp_path / "lora.safetensors", rank=2, scale=0.3, seed=3)
    image = write_test_image(tmp_path / "first.png", width=96, height=64)
    layers = int(read_checkpoint_config(tiny_checkpoint, "transformer")["num_layers"])
    guidance = MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(layers - 1,), modality_scale=2.0)
    outputs = {}
    for name, source in (
        ("single-file", tiny_checkpoint),
        ("folder", folder),
        ("model-files", ModelFiles.from_diffusers(folder, gemma_root=tiny_gemma_root)),
    ):
        gemma = None if isinstance(source, ModelFiles) else tiny_gemma_root  # a set names its text encoder
        pipeline = TI2VidOneStagePipeline(
            source, gemma, loras=[LoraSpec(lora, 0.7)], device="cpu", dtype=torch.float32, progress=False
        )
        generation = pipeline(
            "a lighthouse in a storm", seed=11,
            video=VideoRequest(
                height=64, width=96, num_frames=9, frame_rate=24.0,
                images=[ImageCondition(frame_idx=0, strength=1.0, path=image)],
            ),
            guidance=GuidanceRequest(num_inference_steps=2, video=guidance, audio=guidance),
        )  # fmt: skip
        outputs[name] = (torch.cat(list(generation.frames)), generation.audio)
    want_frames, want_audio = outputs["single-file"]
    for name in ("folder", "model-files"):
        frames, audio = outputs[name]
        assert torch.equal(frames, want_frames), name
        assert torch.equal(audio, want_audio), name


def test_a_diffusers_model_folder_is_accepted_as_the_checkpoint(tiny_checkpoint, model_files, tmp_path):
    from ltx_core.convert import single_file_to_diffusers

    folder = single_file_to_diffusers(tiny_checkpoint, tmp_path / "ltx-diffusers")
    argv = ["--checkpoint-path", str(folder), "--gemma-root", str(model_files.gemma_root), "--prompt", "p",
            "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu", "--height", "64", "--width", "64"]  # fmt: skip
    run = ti2vid_one_stage.COMMAND.parse(argv)
    assert run.models.checkpoint == folder and run.parameters["checkpoint_path"] == str(folder)
    single = ti2vid_one_stage.COMMAND.parse(
        [str(tiny_checkpoint) if a == str(folder) else a for a in argv] + ["--overwrite"]
    )
    assert run.models.model_version == single.models.model_version  # the folder's transformer declares it
    assert run.guidance == single.guidance and run.models.num_layers == single.models.num_layers
    # A diffusers folder's text_encoder/ is not read: the Gemma folder is still required.
    no_gemma = [a for a in argv if a not in ("--gemma-root", str(model_files.gemma_root))]
    with pytest.raises(SystemExit):
        ti2vid_one_stage.COMMAND.parse(no_gemma)


def test_the_command_line_refuses_a_folder_of_another_model_family(capsys, model_files, tmp_path):
    other = tmp_path / "sdxl"
    other.mkdir()
    (other / "model_index.json").write_text('{"_class_name": "StableDiffusionXLPipeline"}')
    argv = ["--checkpoint-path", str(other), "--gemma-root", str(model_files.gemma_root), "--prompt", "p",
            "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu"]  # fmt: skip
    with pytest.raises(SystemExit) as info:
        ti2vid_one_stage.COMMAND.parse(argv)
    assert info.value.code == 2 and "--checkpoint-path" in capsys.readouterr().err


def test_the_distilled_command_line_takes_the_folder_and_its_latent_upsampler(folder, tiny_gemma_root, tmp_path):
    from ltx_pipelines import distilled

    argv = ["--distilled-checkpoint-path", str(folder), "--spatial-upsampler-path", str(folder / "latent_upsampler"),
            "--gemma-root", str(tiny_gemma_root), "--prompt", "p", "--output-path", str(tmp_path / "o.mp4"),
            "--device", "cpu", "--height", "64", "--width", "64"]  # fmt: skip
    run = distilled.COMMAND.parse(argv)
    assert run.models.checkpoint == folder and run.models.spatial_upsampler == folder / "latent_upsampler"
    assert run.parameters["spatial_upsampler_path"] == str(folder / "latent_upsampler")
    assert distilled.main([*argv, "--dtype", "float32", "--num-frames", "9", "--log-level", "WARNING"]) == 0
    assert (tmp_path / "o.mp4").stat().st_size > 0


def test_the_folders_latent_upsampler_is_the_default_spatial_upsampler(folder, tiny_gemma_root, tmp_path):
    from ltx_pipelines import distilled

    argv = ["--distilled-checkpoint-path", str(folder), "--gemma-root", str(tiny_gemma_root), "--prompt", "p",
            "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu", "--height", "64", "--width", "64"]  # fmt: skip
    run = distilled.COMMAND.parse(argv)
    assert run.models.spatial_upsampler == folder / "latent_upsampler"
    assert run.parameters["spatial_upsampler_path"] == str(folder / "latent_upsampler")


def test_the_build_log_names_each_component_folder(folder, caplog):
    """Every diffusers folder's weights file has the same name: the log says which folders a model came from."""
    with caplog.at_level("INFO", logger="ltx_core.loader.builder"), loaded(VOCODER, folder, PLACEMENT):
        pass
    built = (
        "built vocoder from audio_vae/diffusion_pytorch_model.safetensors, vocoder/diffusion_pytorch_model.safetensors"
    )
    assert built in caplog.text


def test_a_hub_folders_latent_upsampler_is_the_default_spatial_upsampler(
    folder, tiny_gemma_root, tmp_path, monkeypatch
):
    """An hf:// model folder's own `latent_upsampler/` is the default --spatial-upsampler-path, fetched like
    the folder (the Hub is faked by a snapshot of the local folder)."""
    import huggingface_hub

    from ltx_pipelines import distilled

    fetched: list[object] = []

    def fake_snapshot_download(**kwargs):
        fetched.append(kwargs.get("allow_patterns"))
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    argv = ["--distilled-checkpoint-path", "hf://org/ltx-2-diffusers", "--gemma-root", str(tiny_gemma_root),
            "--prompt", "p", "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu",
            "--height", "64", "--width", "64"]  # fmt: skip
    run = distilled.COMMAND.parse(argv)
    assert run.models.spatial_upsampler == folder / "latent_upsampler"
    assert run.parameters["spatial_upsampler_path"] == "hf://org/ltx-2-diffusers/latent_upsampler"
    assert ["latent_upsampler/*"] in fetched  # only that sub-folder is fetched for it
