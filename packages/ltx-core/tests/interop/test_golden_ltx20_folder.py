"""Parity on LTX-2.0 (19B layout) diffusers folders: `interop/ltx-2.0/` holds a tiny 2.0 single file (no
`model_version`, flat HiFi-GAN vocoder without bandwidth extension, caption projection inside the transformer,
unequal video / audio head counts), the folder diffusers' own converter wrote from it (`--version 2.0`), and the
outputs of the reference's models and of diffusers' classes on recorded inputs (see that folder's README).

Every file comes from the sub-set's manifest, every shape and size from the files: the inputs file, the
checkpoint's `config` metadata and each folder's config.json."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from ltx_core.convert import single_file_to_diffusers
from ltx_core.loader import ModelFiles, build_model
from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.transformer.model import Modality
from ltx_core.model.video_vae import VIDEO_DECODER

SOURCES = ("checkpoint", "diffusers")
# The producer's version stamp: the folder says which diffusers release wrote it, ours the layout we follow.
PRODUCER_KEYS = {"_diffusers_version"}


def _source(subset, name):
    return subset.checkpoint if name == "checkpoint" else ModelFiles.from_diffusers(subset.diffusers_folder)


def _load(path, what: str) -> dict[str, torch.Tensor]:
    if path is None or not path.is_file():
        pytest.skip(f"the LTX-2.0 interop set has no {what}")
    return load_file(str(path))


def _modality(x: dict[str, torch.Tensor], stream: str) -> Modality:
    latent, sigma = x[f"transformer.{stream}_latent"], x["transformer.sigma"]
    return Modality(
        latent=latent, sigma=sigma, timesteps=sigma.reshape(-1, 1, 1).expand(*latent.shape[:2], 1).clone(),
        positions=x[f"transformer.{stream}_positions"], context=x[f"transformer.{stream}_context"],
    )  # fmt: skip


@pytest.mark.golden
def test_ltx20_folder_reads_the_single_files_weights(golden_ltx20):
    files = ModelFiles.from_diffusers(golden_ltx20.diffusers_folder)
    checkpoint = golden_ltx20.checkpoint
    for spec in (AV_TRANSFORMER, VIDEO_DECODER, AUDIO_DECODER, VOCODER):
        got, want = (build_model(spec, s, device="cpu").state_dict() for s in (files, checkpoint))
        assert got.keys() == want.keys(), spec.name
        assert not [k for k in want if not torch.equal(got[k], want[k])], spec.name


@pytest.mark.golden
@pytest.mark.parametrize("source", SOURCES)
def test_ltx20_outputs_match_the_reference(golden_ltx20, source, assert_golden_close):
    """Transformer (video 4 heads, audio 2: the cross-modal RoPE's head split), video decoder and 2.0
    vocoder, built from the single file and from diffusers' folder, against the reference's outputs."""
    x = _load(golden_ltx20.inputs, "inputs")
    want = _load(golden_ltx20.outputs("reference"), "reference outputs")
    models = _source(golden_ltx20, source)
    with torch.no_grad():
        transformer = build_model(AV_TRANSFORMER, models, device="cpu", dtype=torch.float32).eval()
        video, audio = transformer(_modality(x, "video"), _modality(x, "audio"))
        assert_golden_close(video, want["transformer.video"], name=f"{source} transformer video")
        assert_golden_close(audio, want["transformer.audio"], name=f"{source} transformer audio")
        decoder = build_model(VIDEO_DECODER, models, device="cpu", dtype=torch.float32).eval()
        assert_golden_close(decoder(x["vae.latent"]), want["vae.decoded"], name=f"{source} video decoder")
        vocoder = build_model(VOCODER, models, device="cpu", dtype=torch.float32).eval()
        assert_golden_close(vocoder(x["vocoder.mel"]), want["vocoder.waveform"], name=f"{source} vocoder")


@pytest.mark.golden
def test_ltx20_diffusers_outputs_are_the_references(golden_ltx20, assert_golden_close):
    """What diffusers' classes computed from the folder equals what the reference computed from the file: so
    matching one is matching the other."""
    theirs = _load(golden_ltx20.outputs("diffusers"), "diffusers outputs")
    want = _load(golden_ltx20.outputs("reference"), "reference outputs")
    for name in want:
        assert_golden_close(theirs[name], want[name], name=f"diffusers {name}")


@pytest.mark.golden
def test_ltx20_export_writes_the_folder_diffusers_wrote(golden_ltx20, tmp_path):
    """`to-diffusers` on the 2.0 file: the converter's files, key names, dtypes, values and config.json contents
    (the producer's version stamp aside)."""
    want_root = golden_ltx20.diffusers_folder
    got_root = single_file_to_diffusers(golden_ltx20.checkpoint, tmp_path / "out")
    for rel in sorted(p.relative_to(want_root) for p in want_root.rglob("*") if p.is_file()):
        if rel.suffix == ".json":
            got, want = (json.loads((r / rel).read_text()) for r in (got_root, want_root))
            strip = lambda c: {k: v for k, v in c.items() if k not in PRODUCER_KEYS}
            assert strip(got) == strip(want), rel
            continue
        got, want = load_file(got_root / rel), load_file(want_root / rel)
        assert got.keys() == want.keys(), rel
        assert not [k for k in want if got[k].dtype != want[k].dtype or not torch.equal(got[k], want[k])], rel


@pytest.mark.golden
def test_ltx20_folder_converts_back_to_the_single_file(golden_ltx20, tmp_path):
    """`from-diffusers` on the converter's 2.0 folder: the single file's tensors (less the VAE statistics
    diffusers does not keep) and a config whose sections build the same models (flat 2.0 vocoder)."""
    from ltx_core.convert import diffusers_to_single_file

    checkpoint = golden_ltx20.checkpoint
    back = diffusers_to_single_file(golden_ltx20.diffusers_folder, tmp_path / "back.safetensors")
    got, want = load_file(back), load_file(checkpoint)
    assert set(got) <= set(want) and not [k for k in got if not torch.equal(got[k], want[k])]
    assert not [k for k in set(want) - set(got) if not k.startswith("vae.per_channel_statistics.")]
    for spec in (AV_TRANSFORMER, VIDEO_DECODER, AUDIO_DECODER, VOCODER):
        a, b = (build_model(spec, s, device="cpu").state_dict() for s in (back, checkpoint))
        assert a.keys() == b.keys() and not [k for k in a if not torch.equal(a[k], b[k])], spec.name
    from ltx_core.loader.safetensors_header import read_safetensors_header
    from ltx_core.model.audio_vae.vocoder_config import vocoder_config_from_checkpoint
    from ltx_core.model.transformer.config import ModelVariant, parse_transformer_config
    from ltx_core.model.video_vae.config import VideoVAEConfig

    got_config, want_config = (read_safetensors_header(p).metadata["config"] for p in (back, checkpoint))
    assert vocoder_config_from_checkpoint(got_config) == vocoder_config_from_checkpoint(want_config)
    assert VideoVAEConfig.from_checkpoint_config(got_config["vae"]) == VideoVAEConfig.from_checkpoint_config(
        want_config["vae"]
    )
    got_t, want_t = (
        parse_transformer_config(c["transformer"], ModelVariant.AUDIO_VIDEO) for c in (got_config, want_config)
    )
    assert got_t == want_t
