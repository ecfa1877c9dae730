"""diffusers as the client: its own classes (a test-only dependency) load what `to-diffusers` writes, strictly,
and compute what our models compute from the single file (tiny configs built in the test, CPU, float32).

The architecture differs from the demo where the demo hides a difference: unequal video / audio head counts
(the cross-modal RoPE), no `spatial_padding_mode` (the decoder reflects), an audio VAE diffusers can hold, and
a vocoder whose stage 1 leaves [-1, 1] (the reference clamps it)."""

from __future__ import annotations

import copy
import json
import logging
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_core.convert import diffusers_to_single_file, single_file_to_diffusers
from ltx_core.loader import build_model
from ltx_core.model.audio_vae import VOCODER
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.transformer.model import Modality
from ltx_core.model.video_vae import VIDEO_DECODER
from ltx_pipelines.demo import DEMO_CONFIG, write_demo_checkpoint

diffusers = pytest.importorskip("diffusers", reason="diffusers (dev group) is not installed")
# Importing diffusers' LTX-2 classes alone takes several seconds on 2 cores.
pytestmark = pytest.mark.slow

TOL = dict(rtol=1e-5, atol=2e-5)


def _client_config() -> dict:
    config = copy.deepcopy(DEMO_CONFIG)
    t = config["transformer"]
    # Video 4 heads of 8, audio 2 heads of 8: the cross-modal RoPE must split by each stream's own count.
    t["num_attention_heads"], t["attention_head_dim"] = 4, 8
    # No spatial_padding_mode: the reference encodes with zeros and decodes with reflect padding.
    del config["vae"]["spatial_padding_mode"]
    # diffusers' audio VAE holds base_channels latent statistics: 8 channels x 16 mel bins = 128.
    config["audio_vae"]["model"]["params"]["ddconfig"]["ch"] = 128
    return config


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("client")
    checkpoint = root / "ltx-client-distilled.safetensors"
    write_demo_checkpoint(checkpoint, config=_client_config())
    # A loud stage-1 vocoder: its output leaves [-1, 1], where the reference's clamp acts.
    with safe_open(str(checkpoint), framework="pt") as f:
        metadata, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    tensors["vocoder.vocoder.conv_post.weight"] = tensors["vocoder.vocoder.conv_post.weight"] * 200
    save_file(tensors, str(checkpoint), metadata=metadata)
    return checkpoint, single_file_to_diffusers(checkpoint, root / "folder")


def _positions(batch: int, axes: int, tokens: int, generator: torch.Generator) -> torch.Tensor:
    start = torch.rand(batch, axes, tokens, 1, generator=generator) * 8
    return torch.cat([start, start + 1], dim=-1)


def test_diffusers_transformer_computes_ours(exported):
    from diffusers import LTX2VideoTransformer3DModel

    checkpoint, folder = exported
    ours = build_model(AV_TRANSFORMER, checkpoint, device="cpu", dtype=torch.float32).eval()
    theirs = LTX2VideoTransformer3DModel.from_pretrained(folder / "transformer", torch_dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(0)
    tv, ta, s, sigma = 8, 5, 6, 0.7
    video = Modality(
        latent=torch.randn(1, tv, 128, generator=g), timesteps=torch.full((1, tv, 1), sigma),
        sigma=torch.tensor([sigma]), positions=_positions(1, 3, tv, g), context=torch.randn(1, s, 32, generator=g),
    )  # fmt: skip
    audio = Modality(
        latent=torch.randn(1, ta, 128, generator=g), timesteps=torch.full((1, ta, 1), sigma),
        sigma=torch.tensor([sigma]), positions=_positions(1, 1, ta, g), context=torch.randn(1, s, 16, generator=g),
    )  # fmt: skip
    with torch.no_grad():
        want_v, want_a = ours(video, audio)
        scaled = torch.tensor([sigma * 1000.0])
        out = theirs(
            hidden_states=video.latent, audio_hidden_states=audio.latent,
            encoder_hidden_states=video.context, audio_encoder_hidden_states=audio.context,
            timestep=scaled, audio_timestep=scaled, sigma=scaled, audio_sigma=scaled,
            video_coords=video.positions, audio_coords=audio.positions, return_dict=False,
        )  # fmt: skip
    torch.testing.assert_close(out[0], want_v, **TOL)
    torch.testing.assert_close(out[1], want_a, **TOL)


def test_diffusers_video_decoder_computes_ours(exported):
    from diffusers import AutoencoderKLLTX2Video

    checkpoint, folder = exported
    config = json.loads((folder / "vae" / "config.json").read_text())
    assert (config["encoder_spatial_padding_mode"], config["decoder_spatial_padding_mode"]) == ("zeros", "reflect")
    ours = build_model(VIDEO_DECODER, checkpoint, device="cpu", dtype=torch.float32).eval()
    theirs = AutoencoderKLLTX2Video.from_pretrained(folder / "vae", torch_dtype=torch.float32).eval()
    latent = torch.randn(1, 128, 2, 2, 3, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = ours(latent)
        # diffusers' decode takes the un-normalized latent (its pipeline applies the statistics).
        mean, std = (theirs.latents_mean.view(1, -1, 1, 1, 1), theirs.latents_std.view(1, -1, 1, 1, 1))
        got = theirs.decode(latent * std + mean, return_dict=False)[0]
    torch.testing.assert_close(got, want, **TOL)


def test_diffusers_vocoder_clamps_stage_one_as_ours(exported):
    from diffusers.pipelines.ltx2 import LTX2VocoderWithBWE

    checkpoint, folder = exported
    ours = build_model(VOCODER, checkpoint, device="cpu", dtype=torch.float32).eval()
    theirs = LTX2VocoderWithBWE.from_pretrained(folder / "vocoder", torch_dtype=torch.float32).eval()
    mel = torch.randn(1, 2, 6, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        exported_act = theirs.vocoder.final_act_fn
        theirs.vocoder.final_act_fn = None
        assert theirs.vocoder(mel).abs().max() > 1.5, "the test's stage 1 stays inside [-1, 1]"
        theirs.vocoder.final_act_fn = exported_act
        torch.testing.assert_close(theirs.vocoder(mel), ours.vocoder(mel), **TOL)
        torch.testing.assert_close(theirs(mel), ours(mel), **TOL)


def test_every_component_loads_strictly_and_the_distilled_scheduler_is_written(exported):
    from diffusers import AutoencoderKLLTX2Audio, FlowMatchEulerDiscreteScheduler
    from diffusers.pipelines.ltx2 import LTX2TextConnectors

    _, folder = exported
    AutoencoderKLLTX2Audio.from_pretrained(folder / "audio_vae")
    LTX2TextConnectors.from_pretrained(folder / "connectors")
    diffusers.LTX2Pipeline.from_pretrained(folder, text_encoder=None, tokenizer=None)
    scheduler = FlowMatchEulerDiscreteScheduler.from_pretrained(folder / "scheduler")
    assert scheduler.config.use_dynamic_shifting is False and scheduler.config.shift_terminal is None


def test_an_export_diffusers_cannot_load_is_warned_about(tmp_path, caplog):
    from ltx_core.loader import CheckpointError

    checkpoint = tmp_path / "demo.safetensors"
    write_demo_checkpoint(checkpoint)  # audio VAE: ch 16, 128 latent statistics
    with caplog.at_level(logging.WARNING, logger="ltx_core.convert"):
        single_file_to_diffusers(checkpoint, tmp_path / "folder")
    assert "base_channels (ch) 16" in caplog.text
    with pytest.raises(CheckpointError, match="diffusers could not load"):
        single_file_to_diffusers(checkpoint, tmp_path / "refused", allow_unloadable=False)
    assert not (tmp_path / "refused").exists()
    scheduler = json.loads((tmp_path / "folder" / "scheduler" / "scheduler_config.json").read_text())
    assert scheduler["use_dynamic_shifting"] is True and scheduler["shift_terminal"] == 0.1


def test_a_folder_diffusers_saved_reads_back(exported, tmp_path):
    """Each component saved by diffusers' own `save_pretrained` (its config.json with every key it writes)
    reads back into the same single file."""
    from diffusers import AutoencoderKLLTX2Video

    _, folder = exported
    resaved = tmp_path / "resaved"
    shutil.copytree(folder, resaved)
    shutil.rmtree(resaved / "vae")
    AutoencoderKLLTX2Video.from_pretrained(folder / "vae").save_pretrained(resaved / "vae")
    back = diffusers_to_single_file(resaved, tmp_path / "back.safetensors")
    with safe_open(str(back), framework="pt") as f:
        config = json.loads(f.metadata()["config"])
    assert "spatial_padding_mode" not in config["vae"]
    assert config["vae"].get("encoder_spatial_padding_mode", "zeros") == "zeros"


def _plain(value):
    """Tuples and lists are the same JSON value."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def test_keys_at_diffusers_defaults_may_be_absent(exported, tmp_path):
    """A config.json without the keys whose value is the class default (as older diffusers releases saved
    them) means the same to us as to diffusers: the folder describes the same reference config."""
    import inspect

    from diffusers import pipelines

    from ltx_core.loader.diffusers_folder import read_diffusers_folder

    _, folder = exported
    stripped_root = tmp_path / "stripped"
    shutil.copytree(folder, stripped_root)
    removed = 0
    for config_path in stripped_root.glob("*/config.json"):
        config = json.loads(config_path.read_text())
        cls = getattr(diffusers, config["_class_name"], None) or getattr(pipelines.ltx2, config["_class_name"])
        defaults = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()}
        kept = {k: v for k, v in config.items() if k not in defaults or _plain(defaults[k]) != _plain(v)}
        removed += len(config) - len(kept)
        config_path.write_text(json.dumps(kept))
    assert removed > 20, removed
    assert read_diffusers_folder(stripped_root).config == read_diffusers_folder(folder).config
