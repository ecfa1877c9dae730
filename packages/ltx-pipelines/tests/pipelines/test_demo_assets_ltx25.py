"""The LTX-2.5 demo set: split files in the released layout and metadata, each built through
`build_model` from the `ModelFiles` value and run on a tiny input (CPU); cached like the 2.3 set."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

import ltx_pipelines.demo.ltx25 as ltx25
from ltx_core.loader import Component, LoraSpec, ModelFiles, build_model, read_safetensors_header
from ltx_core.loader.model_files import text_encoder_version
from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER, decode_audio
from ltx_core.model.duration_head import DURATION_HEAD, predict_num_frames
from ltx_core.model.transformer import AV_TRANSFORMER, Modality
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.model.video_vae import DIFFUSION_VIDEO_DECODER, VIDEO_DECODER, VIDEO_ENCODER, video_decoder_spec
from ltx_core.model.video_vae.vae_class import video_scale_factors
from ltx_core.text_encoders.gemma.prompt_encoding import encode_prompts_from_files
from ltx_pipelines.demo import DEMO_FAMILIES, default_demo_dir, ensure_demo_assets
from ltx_pipelines.demo.ltx25 import Ltx25DemoAssets
from ltx_pipelines.engine.ic_references import reference_factors

pytestmark = pytest.mark.slow

F32 = {"dtype": torch.float32, "device": "cpu"}
WRITERS = (
    "write_ltx25_transformer",
    "write_ltx25_text_encoder",
    "write_ltx25_video_vae",
    "write_ltx25_video_vae_conv",
    "write_ltx25_audio_vae",
    "write_ltx25_duration_head",
    "write_ltx25_spatial_upsampler",
    "write_ltx25_temporal_upsampler",
    "write_ltx25_dubit_ic_lora",
    "write_ltx25_detailing_ic_lora",
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Ltx25DemoAssets:
    return ensure_demo_assets(tmp_path_factory.mktemp("demo25") / "cache", family="ltx-2.5")


@pytest.fixture(scope="module")
def files(demo: Ltx25DemoAssets) -> ModelFiles:
    return demo.model_files()


@pytest.fixture(scope="module")
def contexts(files: ModelFiles):
    with torch.inference_mode():
        return encode_prompts_from_files(["a red fox runs through snow"], files, **F32).contexts


def test_metadata_is_what_the_released_files_carry(demo, files):
    assert files.model_version() == (2, 5, 1)
    transformer_meta = read_safetensors_header(demo.transformer).metadata
    wanted = transformer_meta["gemma_source_checkpoint"]["gemma_version"]
    assert text_encoder_version(demo.text_encoder) == wanted
    flags = transformer_meta["config"]["transformer"]
    assert flags["use_keyframes_abs_pos_embedding"] is True and flags["use_prompt_adaln_single"] is False
    assert not (flags["ff_bias"] or flags["audio_ff_bias"] or flags["connector_ff_bias"])
    for path in (demo.video_vae, demo.video_vae_conv, demo.audio_vae, demo.duration_head):
        assert read_safetensors_header(path).metadata["model_version"] == "2.5.1", path.name
    diffusion = read_safetensors_header(demo.video_vae)
    conv = read_safetensors_header(demo.video_vae_conv)
    assert video_decoder_spec(diffusion.metadata["config"]) is DIFFUSION_VIDEO_DECODER
    assert video_decoder_spec(conv.metadata["config"]) is VIDEO_DECODER
    # The diffusion decoder is stored raw: static gates beside the layers they scale.
    assert any(k.endswith(".gate_msa") for k in diffusion.tensors)
    for header in (diffusion, conv):
        factors = video_scale_factors(header.metadata["config"]["vae"])
        assert (factors.time, factors.height, factors.width) == (8, 32, 32)
    # Every weight is stored as bfloat16, as released (the tokenizer assets are bytes).
    dtypes = {t.dtype for t in read_safetensors_header(demo.transformer).tensors.values()}
    assert dtypes == {"BF16"}


def test_text_path_and_transformer_run_on_the_split_set(files, contexts):
    assert contexts.video.shape[-1] == 32 and contexts.audio.shape[-1] == 16
    model = build_model(AV_TRANSFORMER, files, **F32)
    assert model.keyframes_abs_pos_embedding is not None and not hasattr(model, "prompt_adaln_single")
    frames, tokens_per_frame, audio_tokens = 2, 4, 5
    tokens = frames * tokens_per_frame
    g = torch.Generator().manual_seed(0)
    sigma = torch.tensor([0.6])

    def positions(n: int, axes: int) -> torch.Tensor:
        start = torch.arange(n, dtype=torch.float32)
        return torch.stack([start, start + 1], -1)[None, None].expand(1, axes, n, 2).clone()

    video = Modality(
        latent=torch.randn(1, tokens, 128, generator=g),
        timesteps=sigma.expand(1, tokens)[..., None].clone(),
        sigma=sigma,
        positions=positions(tokens, 3),
        context=contexts.video,
        context_mask=contexts.mask,
    )
    audio = Modality(
        latent=torch.randn(1, audio_tokens, 128, generator=g),
        timesteps=sigma.expand(1, audio_tokens)[..., None].clone(),
        sigma=sigma,
        positions=positions(audio_tokens, 1),
        context=contexts.audio,
        context_mask=contexts.mask,
    )
    mask = torch.zeros(1, tokens, 1)
    mask[:, :tokens_per_frame] = 1.0
    with torch.inference_mode():
        plain_v, plain_a = model(video, audio)
        keyed_v, _ = model(replace(video, keyframes_mask=mask), audio)
    assert plain_v.shape == video.latent.shape and plain_a.shape == audio.latent.shape
    assert torch.isfinite(plain_v).all() and torch.isfinite(plain_a).all()
    assert not torch.equal(keyed_v, plain_v)  # the keyframe embedding is live


def test_duration_head_predicts_a_frame_count(files, contexts):
    head = build_model(DURATION_HEAD, files, **F32)
    with torch.inference_mode():
        frames = predict_num_frames(head, contexts.video, contexts.audio, frame_rate=24.0)
    assert frames >= 1 and (frames - 1) % 8 == 0


@pytest.mark.parametrize("conv_vae", [False, True], ids=["diffusion-decoder", "conv-decoder"])
def test_video_vae_encodes_and_decodes(demo, conv_vae):
    files = demo.model_files(conv_vae=conv_vae)
    source = files.source(Component.VIDEO_VAE)
    encoder = build_model(VIDEO_ENCODER, files, **F32)
    decoder = build_model(video_decoder_spec(source.read_metadata()["config"]), files, **F32)
    video = torch.rand(1, 3, 9, 64, 64, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.inference_mode():
        latent = encoder(video)
        assert latent.shape == (1, 128, 2, 2, 2)
        frames = torch.cat(list(decoder.decode_video(latent, None, torch.Generator().manual_seed(2))))
    assert frames.shape == (9, 64, 64, 3)
    assert torch.isfinite(frames).all() and float(frames.min()) >= 0 and float(frames.max()) <= 1


def test_both_video_vae_files_share_the_encoder(demo):
    diffusion, conv = load_file(str(demo.video_vae)), load_file(str(demo.video_vae_conv))
    shared = [k for k in diffusion if k.startswith(("vae.encoder.", "vae.per_channel_statistics."))]
    assert shared and all(torch.equal(diffusion[k], conv[k]) for k in shared)


def test_audio_vae_round_trip_and_vocoder(files):
    encoder = build_model(AUDIO_ENCODER, files, **F32)
    decoder = build_model(AUDIO_DECODER, files, **F32)
    vocoder = build_model(VOCODER, files, **F32)
    latent = torch.randn(1, 8, 3, 16, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        waveform = decode_audio(latent, decoder, vocoder)
        mel = torch.randn(1, 2, 12, 64, generator=torch.Generator().manual_seed(4))
        encoded = encoder(mel)
    assert waveform.shape[:2] == (1, 2) and waveform.shape[2] > 0 and torch.isfinite(waveform).all()
    assert encoded.shape[1] == 8 and torch.isfinite(encoded).all()


def test_spatial_and_temporal_upsamplers(demo, files):
    statistics = build_model(VIDEO_ENCODER, files, **F32).per_channel_statistics
    latent = torch.randn(1, 128, 3, 2, 2, generator=torch.Generator().manual_seed(5))
    spatial_model = build_model(LATENT_UPSAMPLER, demo.spatial_upsampler, **F32)
    temporal_model = build_model(LATENT_UPSAMPLER, demo.temporal_upsampler, **F32)
    with torch.inference_mode():
        spatial = upsample_video_latent(latent, spatial_model, statistics)
        temporal = upsample_video_latent(latent, temporal_model, statistics)
    assert spatial.shape == (1, 128, 3, 4, 4)
    assert temporal.shape == (1, 128, 5, 2, 2)


@pytest.mark.parametrize(
    ("name", "downscale", "streams"),
    [("dubit_ic_lora", 1, {"video", "audio", "cross-modal"}), ("detailing_ic_lora", 2, {"video"})],
)
def test_ic_loras_are_in_the_released_layout_and_fuse_into_the_transformer(demo, name, downscale, streams):
    """ComfyUI layout (`diffusion_model.<module>.lora_A.weight` (r, in) / `.lora_B.weight` (out, r)), bfloat16,
    no alpha, the reference scale in the metadata; every pair changes its weight of the demo transformer."""
    path = getattr(demo, name)
    header = read_safetensors_header(path)
    assert header.metadata == {"reference_downscale_factor": downscale}
    assert reference_factors([LoraSpec(path)]).downscale == downscale
    assert {t.dtype for t in header.tensors.values()} == {"BF16"}
    modules = {k.removesuffix(".lora_A.weight") for k in header.tensors if k.endswith(".lora_A.weight")}
    assert set(header.tensors) == {f"{m}.lora_{ab}.weight" for m in modules for ab in "AB"}
    layers = read_safetensors_header(demo.transformer).metadata["config"]["transformer"]["num_layers"]
    assert {m.split(".")[2] for m in modules} == {str(i) for i in range(layers)}
    kinds = {
        "attn1": "video", "attn2": "video", "ff": "video", "audio_attn1": "audio", "audio_attn2": "audio",
        "audio_ff": "audio", "audio_to_video_attn": "cross-modal", "video_to_audio_attn": "cross-modal",
    }  # fmt: skip
    assert {kinds[m.split(".")[3]] for m in modules} == streams
    plain = build_model(AV_TRANSFORMER, demo.transformer, **F32).state_dict()
    fused = build_model(AV_TRANSFORMER, demo.transformer, loras=[LoraSpec(path)], **F32).state_dict()
    for module in modules:
        key = module.removeprefix("diffusion_model.") + ".weight"
        a, b = (header.tensors[f"{module}.lora_{ab}.weight"].shape for ab in "AB")
        assert (b[0], a[1]) == tuple(plain[key].shape) and a[0] == b[1]
        assert not torch.equal(fused[key], plain[key]), key
    assert sum(not torch.equal(fused[k], plain[k]) for k in plain) == len(modules)


def test_family_is_checked_and_caches_are_apart(tmp_path, monkeypatch):
    assert DEMO_FAMILIES == ("ltx-2.3", "ltx-2.5")
    with pytest.raises(ValueError, match="unknown demo model family 'ltx-3'.*ltx-2.3, ltx-2.5"):
        ensure_demo_assets(tmp_path, family="ltx-3")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_demo_dir("ltx-2.5") != default_demo_dir() == default_demo_dir("ltx-2.3")


def test_damaged_file_is_rebuilt_alone_with_the_same_weights(demo, tmp_path, monkeypatch):
    calls: Counter = Counter()

    def counting(name: str, real: Callable[..., None]) -> Callable[..., None]:
        def build(*args: Any, **kwargs: Any) -> None:
            calls[name] += 1
            real(*args, **kwargs)

        return build

    for name in WRITERS:
        monkeypatch.setattr(ltx25, name, counting(name, getattr(ltx25, name)))
    root = tmp_path / "cache"
    shutil.copytree(demo.root, root)
    copy = ltx25.ltx25_demo_assets_at(root)
    assert ensure_demo_assets(root, family="ltx-2.5") == copy and not calls
    size = copy.duration_head.stat().st_size
    with copy.duration_head.open("r+b") as f:
        f.truncate(size // 2)
    ensure_demo_assets(root, family="ltx-2.5")
    assert calls == Counter({"write_ltx25_duration_head": 1})
    original, rebuilt = load_file(str(demo.duration_head)), load_file(str(copy.duration_head))
    assert original.keys() == rebuilt.keys() and all(original[k].equal(rebuilt[k]) for k in original)
    assert not [p.name for p in Path(root).iterdir() if ".partial" in p.name]
