"""A set of model files reads each file's header once (`FileHeaders`) and works its facts out once
(`ModelFiles.info`, a `CheckpointInfo`)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import (
    CheckpointInfo,
    Component,
    ComponentSpec,
    ModelFiles,
    SDOps,
    VideoDecoderKind,
    build_model,
)
from ltx_core.loader.builder import header_weight_shapes

NET_KEYS = SDOps("tiny_net").keeping(prefix="net.").renaming_prefix("net.")
TRANSFORMER = {"_class_name": "AVTransformer3DModel", "num_layers": 2}


@pytest.fixture
def spec(tiny_configurator_fn):
    return ComponentSpec(
        "tiny net", NET_KEYS, tiny_configurator_fn, config_section="tiny", component=Component.VIDEO_VAE
    )


def test_a_set_reads_each_header_once_however_often_it_is_asked(spec, tiny_checkpoint, header_reads):
    path, _ = tiny_checkpoint
    counts = header_reads  # set up after the checkpoint was written: counts from here
    files = ModelFiles.single_file(path)
    for _ in range(2):  # what one run asks: facts, configs, metadata, weight shapes, two model builds
        assert files.info.model_version == (2, 3, 0)
        assert files.config()["tiny"] == {"width": 4, "out": 3}
        assert files.source(Component.AUDIO_VAE).read_metadata()["model_version"] == "2.3.0"
        header_weight_shapes(spec, files)
        build_model(spec, files)
    assert counts == {path.name: 1}
    # A path given instead of the set is read on each build: the set is what keeps the headers.
    build_model(spec, path)
    build_model(spec, path)
    assert counts == {path.name: 3}


def test_the_facts_of_a_split_set(write_safetensors):
    transformer = write_safetensors(
        "transformer.safetensors",
        {"model.diffusion_model.w": torch.zeros(1)},
        {
            "config": {"transformer": {**TRANSFORMER, "use_keyframes_abs_pos_embedding": True}},
            "model_version": "2.4-rc1",
        },
    )
    vae = write_safetensors(
        "vae.safetensors", {"vae.w": torch.zeros(1)}, {"config": {"vae": {"_class_name": "CausalDiffusionVAE"}}}
    )
    head = write_safetensors("head.safetensors", {"duration_head.w": torch.zeros(1)}, {"config": {"duration_head": {}}})
    files = ModelFiles.split(transformer=transformer, video_vae=vae, duration_head=head)
    info = files.info
    assert info is files.info  # worked out once, kept with the set
    assert info.model_version == (2, 4) and info.declared_version == "2.4-rc1"
    assert info.has_duration_head and info.keyframe_embedding_problem is None
    assert info.video_decoder is VideoDecoderKind.DIFFUSION
    assert info.section("transformer")["num_layers"] == 2 and info.section("audio_vae") == {}
    assert info.metadata["model_version"] == "2.4-rc1"
    bare = CheckpointInfo.of(ModelFiles.split(video_vae=vae))  # decoders alone: no transformer to ask
    assert bare.model_version == () and not bare.has_duration_head
    assert "no 'transformer' config section" in (bare.keyframe_embedding_problem or "")


def test_a_replaced_video_vae_decides_the_decoder_and_lacking_keyframes_are_named(write_safetensors):
    checkpoint = write_safetensors(
        "single.safetensors",
        {"model.diffusion_model.w": torch.zeros(1)},
        {"config": {"transformer": TRANSFORMER, "vae": {"_class_name": "CausalVideoAutoencoder"}}},
    )
    diffusion_vae = write_safetensors(
        "vae.safetensors", {"vae.w": torch.zeros(1)}, {"config": {"vae": {"_class_name": "CausalDiffusionVAE"}}}
    )
    assert ModelFiles.single_file(checkpoint).info.video_decoder is VideoDecoderKind.CONV
    replaced = ModelFiles.single_file(checkpoint, video_vae=diffusion_vae)
    # config() gives the transformer file's sections first; the decoder is the replacement's own.
    assert replaced.config()["vae"]["_class_name"] == "CausalVideoAutoencoder"
    assert replaced.info.video_decoder is VideoDecoderKind.DIFFUSION
    assert "lacks use_keyframes_abs_pos_embedding" in (replaced.info.keyframe_embedding_problem or "")
    assert replaced.info.model_version == () and replaced.info.declared_version is None
