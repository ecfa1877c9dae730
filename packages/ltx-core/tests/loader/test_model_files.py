"""The model-files value: single file and split sets, wrong mixes, and building a component from it."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.loader import (
    CheckpointError,
    Component,
    ComponentSource,
    ComponentSpec,
    Layout,
    ModelFiles,
    SDOps,
    StateDictCache,
    build_model,
)

NET_KEYS = SDOps("tiny_net").keeping(prefix="net.").renaming_prefix("net.")
CONFIG = {"config": {"tiny": {"width": 4, "out": 3}}}


@pytest.fixture
def spec(tiny_configurator_fn):
    return ComponentSpec(
        "tiny net", NET_KEYS, tiny_configurator_fn, config_section="tiny", component=Component.VIDEO_VAE
    )


def test_single_file_serves_every_component_from_one_path(spec, tiny_checkpoint):
    path, weights = tiny_checkpoint
    files = ModelFiles.single_file(path)
    assert files.layout is Layout.SINGLE_FILE
    for c in (Component.TRANSFORMER, Component.TEXT_EMBEDDINGS, Component.VIDEO_VAE, Component.AUDIO_VAE):
        assert files.source(c).files == (path,)
    assert not files.has(Component.DURATION_HEAD)
    assert files.model_version() == (2, 3, 0)
    via_files = build_model(spec, files)
    via_path = build_model(spec, path)
    for k, v in via_path.state_dict().items():
        assert torch.equal(v, via_files.state_dict()[k])
    assert torch.equal(via_files.head.weight, weights["net.head.weight"].float())


def test_split_set_reads_each_component_from_its_file(spec, tiny_checkpoint, write_safetensors):
    path, weights = tiny_checkpoint
    vae = write_safetensors("vae.safetensors", {k: v * 2 for k, v in weights.items() if k.startswith("net.")}, CONFIG)
    files = ModelFiles.split(transformer=path, video_vae=vae)
    assert files.layout is Layout.SPLIT
    model = build_model(spec, files)
    assert torch.equal(model.proj.weight, (weights["net.proj.weight"] * 2).float())
    # The text embeddings of a split set are read from the transformer file (+ a packed text encoder).
    assert files.source(Component.TEXT_EMBEDDINGS).files == (path,)


def test_text_embeddings_span_transformer_and_packed_text_encoder(tiny_checkpoint, write_safetensors):
    path, _ = tiny_checkpoint
    te = write_safetensors("te.safetensors", {"text_embedding_projection.w": torch.zeros(1)}, {})
    files = ModelFiles.split(transformer=path, text_encoder=te)
    assert files.source(Component.TEXT_EMBEDDINGS).files == (path, te)


def test_component_spread_over_two_files_is_read_from_both(tiny_configurator_fn, write_safetensors):
    net = {"net.proj.weight": torch.ones(4, 4), "net.proj.bias": torch.ones(4)}
    rest = {"net.head.weight": torch.full((3, 4), 2.0), "net.counts": torch.zeros(2, dtype=torch.int64)}
    a = write_safetensors("a.safetensors", net, CONFIG)
    b = write_safetensors("b.safetensors", rest, {})
    spec = ComponentSpec("tiny net", NET_KEYS, tiny_configurator_fn, config_section="tiny")
    cache = StateDictCache()
    model = build_model(spec, ComponentSource(Component.TEXT_EMBEDDINGS, (a, b)), cache=cache)
    assert torch.equal(model.head.weight, rest["net.head.weight"])
    build_model(spec, ComponentSource(Component.TEXT_EMBEDDINGS, (a, b)), cache=cache)
    assert len(cache) == 1
    assert cache.evict(b) == 1


def test_key_translation_and_explicit_metadata_serve_another_layout(tiny_configurator_fn, write_safetensors):
    """What a diffusers-folder constructor supplies: its own key names, a translation, and a config."""
    weights = {
        "layers.p.weight": torch.randn(4, 4),
        "layers.p.bias": torch.randn(4),
        "layers.h.weight": torch.randn(3, 4),
        "layers.counts": torch.zeros(2, dtype=torch.int64),
    }
    path = write_safetensors("diffusion_pytorch_model.safetensors", weights, {})
    translation = (
        SDOps("to_released")
        .keeping(prefix="layers.")
        .renaming_prefix("layers.", "net.")
        .replacing(".p.", ".proj.")
        .replacing(".h.", ".head.")
    )
    spec = ComponentSpec("tiny net", NET_KEYS, tiny_configurator_fn, config_section="tiny")
    source = ComponentSource(Component.TRANSFORMER, (path,), metadata=CONFIG, key_translation=translation)
    model = build_model(spec, source)
    assert torch.equal(model.proj.weight, weights["layers.p.weight"])
    assert torch.equal(model.head.weight, weights["layers.h.weight"])


def test_key_translation_value_ops_run_before_the_component_rules():
    fused = (
        SDOps("split_fused")
        .keeping()
        .with_value_op(lambda k, t: [(k.replace("qk", "q"), t[:2]), (k.replace("qk", "k"), t[2:])], suffix="qk.weight")
    )
    ops = SDOps("m").keeping(prefix="a.").renaming_prefix("a.", "").after(fused)
    out = dict(ops.translate("a.qk.weight", torch.arange(4.0)))
    assert set(out) == {"q.weight", "k.weight"} and out["k.weight"].tolist() == [2.0, 3.0]
    assert ops.rename("b.x") is None and ops.rename("a.x") == "x"


def test_mix_of_single_file_and_split_flags_is_refused_naming_both(tiny_checkpoint):
    path, _ = tiny_checkpoint
    with pytest.raises(CheckpointError, match=r"--checkpoint-path .*cannot be combined with --transformer-path"):
        ModelFiles.from_paths(checkpoint=path, transformer=path)
    with pytest.raises(CheckpointError, match=r"--gemma-root .*--duration-head-path"):
        ModelFiles.from_paths(checkpoint=path, gemma_root=path.parent, duration_head=path)
    with pytest.raises(CheckpointError, match=r"no model files given"):
        ModelFiles.from_paths()
    # The video VAE fits either shape.
    assert ModelFiles.from_paths(checkpoint=path, video_vae=path).layout is Layout.SINGLE_FILE


def test_split_set_missing_a_needed_component_names_its_flag(tiny_checkpoint):
    path, _ = tiny_checkpoint
    files = ModelFiles.split(transformer=path)
    with pytest.raises(CheckpointError, match=r"video_vae \(--video-vae-path\), audio_vae \(--audio-vae-path\)"):
        files.require(Component.VIDEO_VAE, Component.AUDIO_VAE, purpose="text-to-video")
    with pytest.raises(CheckpointError, match=r"duration_head \(--duration-head-path\)"):
        files.source(Component.DURATION_HEAD)


def test_missing_file_names_the_flag(tmp_path):
    with pytest.raises(CheckpointError, match=r"--audio-vae-path: checkpoint file not found"):
        ModelFiles.split(audio_vae=tmp_path / "nope.safetensors")


def test_standalone_spec_refuses_a_file_set(tiny_configurator_fn, tiny_checkpoint):
    path, _ = tiny_checkpoint
    spec = ComponentSpec("upsampler", NET_KEYS, tiny_configurator_fn, config_section="tiny")
    with pytest.raises(CheckpointError, match="not part of a set of model files"):
        build_model(spec, ModelFiles.single_file(path))


def test_text_encoder_version_must_match_the_transformer(write_safetensors, tmp_path):
    transformer = write_safetensors(
        "t.safetensors",
        {"model.diffusion_model.x": torch.zeros(1)},
        {"config": {"transformer": {}}, "gemma_source_checkpoint": {"gemma_version": "gemma4-12b-ltx-v1"}},
    )
    good = write_safetensors(
        "te.safetensors", {"x": torch.zeros(1)}, {"gemma_config": {"gemma_version": "gemma4-12b-ltx-v1"}}
    )
    ModelFiles.split(transformer=transformer, text_encoder=good)
    bad = write_safetensors(
        "te2.safetensors", {"x": torch.zeros(1)}, {"gemma_config": {"gemma_version": "gemma4-31b-x"}}
    )
    with pytest.raises(CheckpointError, match=r"gemma4-31b-x.*trained with gemma4-12b-ltx-v1.*--text-encoder-path"):
        ModelFiles.split(transformer=transformer, text_encoder=bad)
    folder = tmp_path / "gemma3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    with pytest.raises(CheckpointError, match=r"gemma3.*gemma4-12b-ltx-v1.*--gemma-root"):
        ModelFiles.single_file(transformer, gemma_root=folder)


def test_single_file_with_a_duration_head_provides_it(write_safetensors):
    path = write_safetensors(
        "with_head.safetensors",
        {"model.diffusion_model.x": torch.zeros(1), "duration_head.mlp_out.bias": torch.zeros(1)},
        CONFIG,
    )
    assert ModelFiles.single_file(path).source(Component.DURATION_HEAD).files == (path,)


def test_a_set_names_each_component_once_and_describes_itself(tiny_checkpoint):
    path, _ = tiny_checkpoint
    source = ComponentSource(Component.TRANSFORMER, (path,))
    with pytest.raises(ValueError, match=r"twice: \['transformer'\]"):
        ModelFiles(Layout.SPLIT, (source, source))
    record = ModelFiles.split(transformer=path).as_dict()
    assert record == {
        "layout": "split",
        "components": {"transformer": [str(path)], "text_embeddings": [str(path)]},
    }


def test_check_components_refuses_a_file_without_the_components_section(write_safetensors):
    """Each component's file must carry the config section it is built from: found from headers, before
    anything is loaded (an audio VAE file given as the video VAE, a transformer file as the duration head)."""
    audio = write_safetensors(
        "audio.safetensors", {"audio_vae.x": torch.zeros(1)}, {"config": {"audio_vae": {}, "vocoder": {}}}
    )
    transformer = write_safetensors(
        "t.safetensors", {"model.diffusion_model.x": torch.zeros(1)}, {"config": {"transformer": {}}}
    )
    video = write_safetensors("v.safetensors", {"vae.x": torch.zeros(1)}, {"config": {"vae": {}}})
    good = ModelFiles.split(transformer=transformer, video_vae=video, audio_vae=audio)
    good.check_components(Component.TRANSFORMER, Component.VIDEO_VAE, Component.AUDIO_VAE)
    wrong_vae = ModelFiles.split(transformer=transformer, video_vae=audio, audio_vae=audio)
    with pytest.raises(
        CheckpointError,
        match=r"--video-vae-path: .*audio.safetensors' cannot provide the video_vae: "
        r"its config has no 'vae' section \(sections present: \['audio_vae', 'vocoder'\]\)",
    ):
        wrong_vae.check_components(Component.VIDEO_VAE)
    wrong_head = ModelFiles.split(transformer=transformer, duration_head=transformer)
    with pytest.raises(CheckpointError, match=r"--duration-head-path: .*no 'duration_head' section"):
        wrong_head.check_components(Component.TRANSFORMER)
    single = ModelFiles.single_file(transformer, video_vae=audio)
    with pytest.raises(CheckpointError, match=r"--video-vae-path: .*no 'vae' section"):
        single.check_components()
    # A single file without the audio sections cannot provide the audio VAE.
    no_audio = write_safetensors("s.safetensors", {"vae.x": torch.zeros(1)}, {"config": {"transformer": {}, "vae": {}}})
    with pytest.raises(CheckpointError, match=r"--checkpoint-path: .*no 'audio_vae' or 'vocoder' section"):
        ModelFiles.single_file(no_audio).check_components()
    with pytest.raises(CheckpointError, match=r"needs audio_vae \(--audio-vae-path\)"):
        ModelFiles.split(transformer=transformer).check_components(Component.AUDIO_VAE)
