"""Diffusers model folders: conversion both ways round-trips tensor-exactly, folders build the same models
as the single file, and bad folders are refused before loading (tiny demo models built in-process)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file

from ltx_core.convert import diffusers_to_single_file, main, single_file_to_diffusers
from ltx_core.loader import CheckpointError, ModelFiles, build_model
from ltx_core.loader.diffusers_folder import fetch_diffusers_folder, is_diffusers_folder, upsampler_source
from ltx_core.loader.model_files import Component
from ltx_core.model.audio_vae import VOCODER
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.upsampler import LATENT_UPSAMPLER
from ltx_core.model.video_vae import VIDEO_DECODER
from ltx_pipelines.demo import write_demo_checkpoint, write_demo_upsampler


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("diffusers")
    checkpoint, upsampler = root / "ckpt.safetensors", root / "up.safetensors"
    write_demo_checkpoint(checkpoint)
    write_demo_upsampler(upsampler)
    folder = single_file_to_diffusers(checkpoint, root / "folder", upsamplers=[upsampler])
    return checkpoint, upsampler, folder


def _assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


def test_single_file_round_trip_is_tensor_exact(converted, tmp_path):
    checkpoint, upsampler, folder = converted
    assert is_diffusers_folder(folder)
    back = diffusers_to_single_file(folder, tmp_path / "back.safetensors")
    _assert_same_tensors(load_file(checkpoint), load_file(back))
    up_back = diffusers_to_single_file(folder / "latent_upsampler", tmp_path / "up.safetensors")
    _assert_same_tensors(load_file(upsampler), load_file(up_back))
    # ... and the folder written from the round-tripped file is the same folder.
    again = single_file_to_diffusers(back, tmp_path / "again")
    for component in ("transformer", "connectors", "vae", "audio_vae", "vocoder"):
        weights = "diffusion_pytorch_model.safetensors"
        _assert_same_tensors(load_file(folder / component / weights), load_file(again / component / weights))
        config = json.loads((folder / component / "config.json").read_text())
        assert json.loads((again / component / "config.json").read_text()) == config, component


def test_folder_builds_the_single_file_models(converted):
    checkpoint, upsampler, folder = converted
    files = ModelFiles.from_diffusers(folder)
    for spec in (AV_TRANSFORMER, VIDEO_DECODER, VOCODER):
        _assert_same_tensors(
            build_model(spec, files, device="cpu").state_dict(),
            build_model(spec, checkpoint, device="cpu").state_dict(),
        )
    got = build_model(LATENT_UPSAMPLER, upsampler_source(folder / "latent_upsampler"), device="cpu")
    _assert_same_tensors(got.state_dict(), build_model(LATENT_UPSAMPLER, upsampler, device="cpu").state_dict())


def test_outputs_are_never_overwritten_nor_left_partial(converted, tmp_path):
    checkpoint, _, folder = converted
    with pytest.raises(FileExistsError):
        single_file_to_diffusers(checkpoint, folder)
    existing = tmp_path / "taken.safetensors"
    existing.write_bytes(b"mine")
    with pytest.raises(FileExistsError):
        diffusers_to_single_file(folder, existing)
    assert existing.read_bytes() == b"mine"
    # A failing conversion (not a full checkpoint) leaves nothing behind.
    with pytest.raises(CheckpointError, match="not a full single-file checkpoint"):
        single_file_to_diffusers(folder / "latent_upsampler" / "diffusion_pytorch_model.safetensors", tmp_path / "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.safetensors"]
    assert main(["to-diffusers", str(checkpoint), str(folder)]) == 2


def test_missing_component_is_named(converted, tmp_path):
    _, _, folder = converted
    partial = tmp_path / "partial"
    shutil.copytree(folder, partial)
    shutil.rmtree(partial / "vocoder")
    files = ModelFiles.from_diffusers(partial)
    assert files.has(Component.TRANSFORMER) and not files.has(Component.AUDIO_VAE)
    with pytest.raises(CheckpointError, match=r"audio_vae.*vocoder/ in the diffusers folder"):
        files.require(Component.AUDIO_VAE, purpose="audio decoding")


def test_a_folder_of_some_components_converts_to_a_file_of_those(converted, tmp_path):
    """transformer + connectors + VAE (no audio_vae/, vocoder/): the single file holds what the folder has."""
    checkpoint, _, folder = converted
    partial = tmp_path / "partial"
    shutil.copytree(folder, partial)
    for name in ("audio_vae", "vocoder"):
        shutil.rmtree(partial / name)
    back = load_file(diffusers_to_single_file(partial, tmp_path / "some.safetensors"))
    full = load_file(checkpoint)
    audio = {k for k in full if k.startswith(("audio_vae.", "vocoder."))}
    assert audio and not audio & back.keys()
    dropped = {k for k in full if k.startswith("vae.per_channel_statistics.")} - back.keys()  # diffusers keeps 2
    _assert_same_tensors({k: v for k, v in full.items() if k not in audio | dropped}, back)
    empty = tmp_path / "index_only"
    empty.mkdir()
    shutil.copy(folder / "model_index.json", empty)
    with pytest.raises(CheckpointError, match="holds none of"):
        diffusers_to_single_file(empty, tmp_path / "none.safetensors")
    assert not (tmp_path / "none.safetensors").exists()


def _with_config_field(folder, tmp_path, component: str, field: str, value):
    """A copy of `folder` whose `<component>/config.json` has `field` set to `value`."""
    copy = tmp_path / f"{component}-{field}"
    shutil.copytree(folder, copy)
    path = copy / component / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    return copy


def test_a_config_json_with_wrong_sizes_is_named_before_loading(converted, tmp_path):
    """Sizes a model cannot be built from are refused naming the config.json (not only the field), when the
    folder is read or, for what only the model's own config checks, when the command line resolves the files."""
    from ltx_pipelines.cli.flag_group import FlagError
    from ltx_pipelines.cli.model_flags import ModelChoice, ModelFlags
    from ltx_pipelines.cli.model_resolution import resolve_models
    from ltx_pipelines.engine.model_loading import check_model_configs

    _, _, folder = converted
    vae = _with_config_field(folder, tmp_path, "vae", "block_out_channels", [7, 7, 7, 7])
    with pytest.raises(CheckpointError, match=re.escape(repr(str(vae / "vae" / "config.json"))) + ".*block_out"):
        ModelFiles.from_diffusers(vae)
    transformer = _with_config_field(folder, tmp_path, "transformer", "cross_attention_dim", 33)
    named = re.escape(repr(str(transformer / "transformer" / "config.json"))) + ".*'cross_attention_dim' is 33"
    with pytest.raises(CheckpointError, match=named):
        check_model_configs(transformer)
    vocoder = _with_config_field(folder, tmp_path, "vocoder", "hidden_channels", 7)
    with pytest.raises(CheckpointError, match=re.escape(repr(str(vocoder / "vocoder" / "config.json")))):
        build_model(VOCODER, vocoder, device="cpu")
    flags = ModelFlags(distilled=False, gemma=False)
    with pytest.raises(FlagError, match="--checkpoint-path: " + named):
        resolve_models(flags, ModelChoice(checkpoint=str(transformer), gemma_root=None))
    resolve_models(flags, ModelChoice(checkpoint=str(folder), gemma_root=None))  # the intact folder passes


def test_another_model_family_is_refused_before_loading(converted, tmp_path):
    _, _, folder = converted
    other = tmp_path / "flux"
    shutil.copytree(folder, other)
    index = json.loads((other / "model_index.json").read_text())
    (other / "model_index.json").write_text(json.dumps({**index, "_class_name": "FluxPipeline"}))
    with pytest.raises(CheckpointError, match=r"'FluxPipeline', not of LTX-2"):
        ModelFiles.from_diffusers(other)
    (other / "model_index.json").write_text(json.dumps(index))
    config = json.loads((other / "transformer" / "config.json").read_text())
    (other / "transformer" / "config.json").write_text(json.dumps({**config, "_class_name": "FluxTransformer2DModel"}))
    with pytest.raises(CheckpointError, match=r"FluxTransformer2DModel.*LTX2VideoTransformer3DModel"):
        ModelFiles.from_diffusers(other)


def test_hub_folders_download_only_configs_and_safetensors(converted, monkeypatch):
    _, _, folder = converted
    calls = []

    def fake_snapshot_download(**kwargs):
        calls.append(kwargs)
        return str(folder)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    assert fetch_diffusers_folder("hf://org/ltx-2-diffusers@main") == folder
    assert calls[0]["repo_id"] == "org/ltx-2-diffusers" and calls[0]["revision"] == "main"
    assert "*/*.safetensors" in calls[0]["allow_patterns"] and "*.bin" not in calls[0]["allow_patterns"]
    assert ModelFiles.from_diffusers("hf://org/ltx-2-diffusers").has(Component.VIDEO_VAE)
    with pytest.raises(CheckpointError, match="hf://<org>/<repo>"):
        fetch_diffusers_folder("hf://just-a-name")


def test_a_folder_given_as_the_checkpoint_is_read_as_a_diffusers_folder(converted):
    from ltx_core.loader.model_files import Layout

    _, _, folder = converted
    files = ModelFiles.from_paths(checkpoint=folder)
    assert files.layout is Layout.DIFFUSERS and files.has(Component.TRANSFORMER)
    with pytest.raises(CheckpointError, match="cannot replace the video VAE"):
        ModelFiles.single_file(folder, video_vae=folder / "vae" / "diffusion_pytorch_model.safetensors")


def test_build_model_takes_folder_paths_where_files_are_expected(converted):
    checkpoint, upsampler, folder = converted
    _assert_same_tensors(
        build_model(VOCODER, folder, device="cpu").state_dict(),
        build_model(VOCODER, checkpoint, device="cpu").state_dict(),
    )
    got = build_model(LATENT_UPSAMPLER, folder / "latent_upsampler", device="cpu")
    _assert_same_tensors(got.state_dict(), build_model(LATENT_UPSAMPLER, upsampler, device="cpu").state_dict())


def test_runtime_builds_the_transformer_of_a_sharded_folder(converted, tmp_path):
    """Released diffusers folders shard the transformer: the runtime build (plain, fp8-cast) reads every
    shard; block streaming, which indexes one file, is refused naming the way out."""
    from safetensors.torch import save_file

    from ltx_core.runtime import RuntimeOptions, build_transformer

    checkpoint, _, folder = converted
    sharded = tmp_path / "sharded"
    shutil.copytree(folder, sharded)
    weights = sharded / "transformer" / "diffusion_pytorch_model.safetensors"
    tensors = load_file(weights)
    keys = sorted(tensors)
    for i, part in enumerate((keys[: len(keys) // 2], keys[len(keys) // 2 :]), start=1):
        save_file(
            {k: tensors[k] for k in part},
            str(weights.with_name(f"diffusion_pytorch_model-0000{i}-of-00002.safetensors")),
        )
    weights.unlink()
    assert len(ModelFiles.from_diffusers(sharded).source(Component.TRANSFORMER).files) == 2
    for quantization in (None, "fp8-cast"):
        options = RuntimeOptions(quantization=quantization)
        got = build_transformer(AV_TRANSFORMER, sharded, options, device="cpu", dtype=torch.bfloat16)
        want = build_transformer(AV_TRANSFORMER, checkpoint, options, device="cpu", dtype=torch.bfloat16)
        _assert_same_tensors(got.state_dict(), want.state_dict())
    with pytest.raises(CheckpointError, match=r"block streaming.*one file.*2.*convert from-diffusers"):
        build_transformer(AV_TRANSFORMER, sharded, RuntimeOptions(offload="cpu"), device="cpu")


RUST_FULL_DISK = (
    'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
)


@pytest.mark.parametrize("direction", ["to-diffusers", "from-diffusers"])
def test_a_full_disk_or_a_read_only_folder_is_one_line_and_leaves_nothing(
    direction, converted, tmp_path, monkeypatch, capsys
):
    import errno
    import tempfile

    from safetensors import SafetensorError

    from ltx_core import convert

    checkpoint, _, folder = converted
    args = [direction, str(checkpoint if direction == "to-diffusers" else folder), str(tmp_path / "out")]

    def full(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"half a file")
        raise SafetensorError(RUST_FULL_DISK)

    with monkeypatch.context() as m:
        m.setattr(convert, "save_file", full)
        assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left" in err and str(tmp_path / "out") in err, err
    assert list(tmp_path.iterdir()) == []

    def read_only(*a, dir=None, **k):  # as root a chmod'ed folder stays writable
        raise PermissionError(errno.EACCES, "Permission denied", str(dir))

    with monkeypatch.context() as m:
        m.setattr(tempfile, "mkdtemp", read_only)
        m.setattr(tempfile, "mkstemp", read_only)
        assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Permission denied" in err and "writable folder" in err, err
    assert list(tmp_path.iterdir()) == []
