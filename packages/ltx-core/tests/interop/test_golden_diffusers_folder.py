"""Parity: the diffusers folder of the interop set gives, component by component, exactly the float32
weights the single file gives (the README's bit-for-bit rename), with the architecture read from each
folder's config.json. The forward checks of every component run on both sources in the components'
own golden tests (fixture `golden_model_source`)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import ModelFiles, build_model
from ltx_core.loader.diffusers_folder import upsampler_source
from ltx_core.loader.state_dict import load_files
from ltx_core.model.audio_vae import AUDIO_DECODER, AUDIO_ENCODER, VOCODER
from ltx_core.model.duration_head import DURATION_HEAD
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.upsampler import LATENT_UPSAMPLER
from ltx_core.model.video_vae import VIDEO_DECODER, VIDEO_ENCODER
from ltx_core.model.video_vae.spec import DIFFUSION_VIDEO_DECODER
from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec


def _same_weights(a: torch.nn.Module, b: torch.nn.Module, name: str) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys(), name
    different = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not different, f"{name}: {different[:5]}"


@pytest.mark.golden
def test_every_component_has_the_single_file_weights(golden_checkpoint, golden_interop_dir):
    files = ModelFiles.from_diffusers(golden_interop_dir / "diffusers")
    checkpoint = golden_checkpoint
    for spec in (AV_TRANSFORMER, VIDEO_ENCODER, VIDEO_DECODER, AUDIO_ENCODER, AUDIO_DECODER, VOCODER):
        _same_weights(build_model(spec, files, device="cpu"), build_model(spec, checkpoint, device="cpu"), spec.name)


@pytest.mark.golden
def test_every_upsampler_folder_has_the_upsampler_file_weights(golden_dir, golden_interop_dir):
    import json

    conversion = json.loads((golden_interop_dir / "verification.json").read_text())["conversion"]
    upsamplers = {k: v["source"] for k, v in conversion.items() if isinstance(v, dict) and "source" in v}
    assert upsamplers, "verification.json names no converted upsampler"
    for folder, file_name in upsamplers.items():
        got = build_model(LATENT_UPSAMPLER, upsampler_source(golden_interop_dir / "diffusers" / folder), device="cpu")
        _same_weights(got, build_model(LATENT_UPSAMPLER, golden_dir / file_name, device="cpu"), folder)


@pytest.mark.golden
def test_export_writes_the_folder_diffusers_wrote(golden_dir, golden_checkpoint, golden_interop_dir, tmp_path):
    """`to-diffusers` on the golden checkpoint and upsamplers gives the interop folder: same folders,
    key names, shapes, dtypes, values and config.json contents (`_diffusers_version` included), but for
    one deliberate departure: where diffusers' converter leaves the vocoder's stage 1 unclamped
    (`final_act_fn: null`), we write `clamp`, under which diffusers computes what the reference does."""
    import json

    from safetensors.torch import load_file

    from ltx_core.convert import single_file_to_diffusers

    want_root = golden_interop_dir / "diffusers"
    conversion = json.loads((golden_interop_dir / "verification.json").read_text())["conversion"]
    upsamplers = [golden_dir / v["source"] for v in conversion.values() if isinstance(v, dict) and "source" in v]
    got_root = single_file_to_diffusers(golden_checkpoint, tmp_path / "out", upsamplers=upsamplers)
    from ltx_core.loader.safetensors_header import read_safetensors_header

    source_config = read_safetensors_header(golden_checkpoint).metadata["config"]
    want_files = sorted(p.relative_to(want_root) for p in want_root.rglob("*") if p.is_file())
    assert sorted(p.relative_to(got_root) for p in got_root.rglob("*") if p.is_file()) == want_files
    for rel in want_files:
        if rel.suffix == ".json":
            got_json, want_json = json.loads((got_root / rel).read_text()), json.loads((want_root / rel).read_text())
            if rel.parts[-2:] == ("vocoder", "config.json") and want_json.get("final_act_fn", "") is None:
                # The reference ends stage 1 with tanh when `use_tanh_at_final` (its default), else a clamp.
                stage_one = source_config["vocoder"].get("vocoder", source_config["vocoder"])
                expected = "tanh" if stage_one.get("use_tanh_at_final", True) else "clamp"
                assert got_json.get("final_act_fn") == expected, rel
                want_json["final_act_fn"] = expected
            assert got_json == want_json, rel
            continue
        got, want = load_file(got_root / rel), load_file(want_root / rel)
        assert got.keys() == want.keys(), rel
        for key in want:
            assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), f"{rel}: {key}"


# The split file each folder component comes from (manifest `component_files` keys), where the verification
# record names no single file (the connectors: transformer + the text encoder's projection).
_LTX25_SPLIT_COMPONENT = {
    "transformer": "transformer",
    "audio_vae": "audio_vae",
    "vocoder": "audio_vae",
    "latent_upsampler": "spatial_upsampler",
    "vae": "video_vae",
    "diffusion_decoder": "video_vae",
    "duration_head": "duration_head",
}


def _ltx25_split_file(golden_ltx25_dir, golden_ltx25_manifest, folder, component: str):
    """The split file diffusers converted `component` from: the verification's `source` when it is a file of
    the set, else the manifest's file for that component."""
    source = folder.verification["conversion"][component].get("source", "")
    if (golden_ltx25_dir / source).is_file():
        return golden_ltx25_dir / source
    return golden_ltx25_dir / golden_ltx25_manifest["component_files"][_LTX25_SPLIT_COMPONENT[component]]


@pytest.mark.golden
@pytest.mark.parametrize("component", [*_LTX25_SPLIT_COMPONENT, "connectors"])
def test_ltx25_folder_component_reads_exactly(
    component, golden_ltx25_dir, golden_ltx25_manifest, golden_ltx25_diffusers
):
    """Each component diffusers carries for LTX-2.5 gives the split file's weights - the decoder's and the
    head's q/k/v pieces joined, the decoder's gates folded as the reference folds them; the connectors' FFN
    biases, which the reference's connectors lack, are the zeros diffusers fills in. A component the set's
    `verification_ltx25.json` says the converter did not carry is skipped with its reason."""
    from ltx_core.loader import CheckpointError
    from ltx_core.loader.diffusers_folder import read_diffusers_folder
    from ltx_core.loader.model_files import Component

    golden_ltx25_diffusers.require(component)
    folder = golden_ltx25_diffusers.path
    files = ModelFiles.from_diffusers(folder)
    if component == "connectors":
        names = golden_ltx25_manifest["component_files"]
        split_text = ModelFiles.split(
            transformer=golden_ltx25_dir / names["transformer"], text_encoder=golden_ltx25_dir / names["text_encoder"]
        )
        # The stored tensors the text embeddings are built from (their forward parity: test_golden_ltx25_text).
        ops = text_embeddings_spec().ops
        got, want = (load_files(f.source(Component.TEXT_EMBEDDINGS).reads(ops)) for f in (files, split_text))
        placeholders = sorted(set(got) - set(want))
        # Exactly the zero biases the verification says diffusers filled in (none for connectors with biases).
        filled = golden_ltx25_diffusers.verification["conversion"][component].get("zero_ff_bias_fallback") or {}
        assert len(placeholders) == len(filled.get("zero_bias_tensors", [])), placeholders
        assert all(".ff.net." in k and k.endswith(".bias") for k in placeholders), placeholders
        assert all(not got[k].any() for k in placeholders), "the connectors' extra FFN biases are not zero"
        assert set(want) <= set(got)
        assert not [k for k in want if not torch.equal(got[k], want[k])]
        assert read_diffusers_folder(folder).has(Component.TEXT_EMBEDDINGS)
        return
    split_file = _ltx25_split_file(golden_ltx25_dir, golden_ltx25_manifest, golden_ltx25_diffusers, component)
    if component == "latent_upsampler":
        got = build_model(LATENT_UPSAMPLER, upsampler_source(folder / component), device="cpu")
        _same_weights(got, build_model(LATENT_UPSAMPLER, split_file, device="cpu"), component)
        return
    split = ModelFiles.split(**{_LTX25_SPLIT_COMPONENT[component]: split_file})
    specs = {
        "transformer": (AV_TRANSFORMER,),
        "audio_vae": (AUDIO_ENCODER, AUDIO_DECODER),
        "vocoder": (VOCODER,),
        "vae": (VIDEO_ENCODER,),
        "diffusion_decoder": (DIFFUSION_VIDEO_DECODER,),
        "duration_head": (DURATION_HEAD,),
    }[component]
    for spec in specs:
        _same_weights(build_model(spec, files, device="cpu"), build_model(spec, split, device="cpu"), spec.name)
    if component == "diffusion_decoder":
        # With the diffusion decoder carried, the zero placeholder conv decoder of `vae/` is never read (the
        # conv decoder's configurator refuses the config).
        with pytest.raises(CheckpointError, match="CausalDiffusionVAE"):
            build_model(VIDEO_DECODER, files, device="cpu")


@pytest.mark.golden
def test_released_22b_names_and_configs_translate_both_ways(golden_dir):
    """On the released LTX-2.3 22B key list and config: every key maps to a diffusers name and back to
    itself (the VAE statistics diffusers drops excepted), and each config section survives the diffusers
    config.json and back in every field the models read."""
    import json

    from ltx_core.loader import diffusers_config as dc
    from ltx_core.loader import diffusers_names as dn
    from ltx_core.model.video_vae.config import VideoVAEConfig

    released = json.loads((golden_dir / "ltx-2.3-22b-keys.json").read_text())
    config, keys = released["config"], released["keys"]
    pairs = dc.vae_block_renames(config["vae"])
    forward = {
        "transformer": (dn.transformer_key_to_diffusers, dn.transformer_key_to_reference),
        "connectors": (dn.connectors_key_to_diffusers, dn.connectors_key_to_reference),
        "vae": (lambda k: dn.video_vae_key_to_diffusers(k, pairs), lambda k: dn.video_vae_key_to_reference(k, pairs)),
        "audio_vae": (dn.audio_vae_key_to_diffusers, dn.audio_vae_key_to_reference),
        "vocoder": (dn.vocoder_key_to_diffusers, dn.vocoder_key_to_reference),
    }
    unplaced = []
    for key in keys:
        placed = [(name, to(key)) for name, (to, _) in forward.items() if to(key) is not None]
        if not placed:
            unplaced.append(key)
            continue
        assert len(placed) == 1, f"{key} lands in {placed}"
        name, diffusers_key = placed[0]
        assert forward[name][1](diffusers_key) == key, f"{key} -> {name}/{diffusers_key} does not come back"
    dropped = {f"vae.per_channel_statistics.{s}" for s in ("channel", "mean-of-stds", "mean-of-stds_over_std-of-means")}
    assert set(unplaced) <= dropped, sorted(set(unplaced) - dropped)[:10]

    vae = dc.video_vae_from_diffusers(dc.video_vae_to_diffusers(config["vae"]))
    assert VideoVAEConfig.from_checkpoint_config(vae) == VideoVAEConfig.from_checkpoint_config(config["vae"])
    assert (
        dc.audio_vae_from_diffusers(dc.audio_vae_to_diffusers(config["audio_vae"]))["model"]
        == config["audio_vae"]["model"]
    )
    widths = {part: keys[f"vocoder.{part}.conv_pre.weight"][0][1] for part in ("vocoder", "bwe_generator")}
    exported = dc.vocoder_to_diffusers(
        config["vocoder"], in_channels=widths["vocoder"], bwe_in_channels=widths["bwe_generator"]
    )
    vocoder = dc.vocoder_from_diffusers(exported)
    for part in ("vocoder", "bwe"):
        for field, value in vocoder[part].items():
            assert config["vocoder"][part].get(field, value) == value, (part, field)
    t = config["transformer"]
    stft = config["audio_vae"].get("preprocessing", {}).get("stft", {})
    diffusers_t = dc.transformer_to_diffusers(
        t, vae_scale=dc.vae_scale_factors(config["vae"]), audio_hop_length=stft.get("hop_length", 160),
        audio_sampling_rate=config["audio_vae"]["model"]["params"].get("sampling_rate", 16000),
    )  # fmt: skip
    projection = keys["text_embedding_projection.video_aggregate_embed.weight"][0]
    diffusers_c = dc.connectors_to_diffusers(t, text_proj_in_factor=projection[1] // t["caption_channels"])
    back = dc.transformer_from_diffusers(diffusers_t, diffusers_c)
    different = {k: (t[k], v) for k, v in back.items() if k in t and t[k] != v}
    assert not different, different
