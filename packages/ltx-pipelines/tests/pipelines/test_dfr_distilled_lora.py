"""DFR on a dev transformer with the distilled LoRA (the reference's SFT path): the LoRA is fused into every
stage - stage 1, the detailing stage (under the detailing IC-LoRA) and the temporal tiles. Checked against the
same pipeline on a transformer file with the LoRA fused in beforehand by the test itself (W + s * B @ A in
float32, not through our fusion code): every recorded latent agrees, while a run without the LoRA differs in
every one of them (so a stage that skipped it could not pass). Model files, widths and LoRA targets come from
the golden LTX-2.5 split files; sizes are tiny."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx_core.loader import LoraSpec, ModelFiles, read_safetensors_header
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.dfr import DFRPipeline
from ltx_pipelines.engine import model_loading
from ltx_pipelines.engine.denoising_stage import SeededNoise
from ltx_pipelines.engine.requests import VideoRequest

pytestmark = [pytest.mark.golden, pytest.mark.slow]

STRENGTH = 0.7
SEED = 4
AGREE_ATOL = 1e-5
"""Both runs compute the same float32 weights (the pipeline fuses with `lora_fusion="float32"`): only the
order of the two LoRA additions in the detailing stage differs, ~1e-7 in a weight."""
MATTERS = 100 * AGREE_ATOL
"""How far each latent of the run without the LoRA must be from the run with it."""


def _prefused_transformer(transformer: Path, lora: Path, strength: float, path: Path) -> Path:
    """`transformer` with `strength * B @ A` of every LoRA pair added to its weight, stored as float32 (its
    metadata kept): the same file layout, the LoRA already inside."""
    with safe_open(str(transformer), framework="pt") as f:
        metadata = f.metadata()
        tensors = {key: f.get_tensor(key).float() for key in f.keys()}  # noqa: SIM118 - not a mapping
    with safe_open(str(lora), framework="pt") as f:
        pairs = {key.removesuffix(".lora_A.weight") for key in f.keys() if key.endswith(".lora_A.weight")}  # noqa: SIM118
        for module in sorted(pairs):
            a, b = f.get_tensor(f"{module}.lora_A.weight").float(), f.get_tensor(f"{module}.lora_B.weight").float()
            key = "model." + module + ".weight"
            assert key in tensors, f"the LoRA targets {key}, which the transformer file lacks"
            tensors[key] = tensors[key] + strength * (b @ a)
    save_file(tensors, str(path), metadata=metadata)
    return path


def _random_contexts(transformer: Path, tokens: int = 8) -> TextContexts:
    """Text contexts of the widths the transformer's cross-attentions take (the prompt path is not under test)."""
    config = read_safetensors_header(transformer).metadata["config"]["transformer"]
    generator = torch.Generator().manual_seed(SEED)
    video = torch.randn(1, tokens, config["cross_attention_dim"], generator=generator)
    audio = torch.randn(1, tokens, config["audio_cross_attention_dim"], generator=generator)
    return TextContexts(video, audio, torch.ones(1, tokens, dtype=torch.int64))


def test_distilled_lora_is_fused_into_every_dfr_stage(
    golden_ltx25_dir,
    golden_ltx25_manifest,
    golden_ltx25_fixture,
    golden_ltx25_upsampler,
    write_tiny_lora,
    tmp_path,
    monkeypatch,
):
    names = golden_ltx25_manifest["component_files"]
    more = golden_ltx25_manifest["more_component_files"]
    # The transformer and clip size of the set's own DFR run (a transformer with the keyframe embedding, which
    # the set's base transformer may lack), one temporal round (the tiles are a stage the LoRA must reach).
    dfr = golden_ltx25_fixture("fx_pipeline_ltx25_more").params["dfr"]
    transformer, settings = golden_ltx25_dir / dfr["transformer_file"], dfr["settings"]
    contexts = _random_contexts(transformer)
    # Not under test, and most of the time of these tiny runs: the audio is decoded only to cut it to the video's
    # length (no LoRA reaches it), and each freed stage model is followed by a full gc pass (~0.5 s here).
    monkeypatch.setattr(DFRPipeline, "_audio_cut_to_video", staticmethod(lambda final: final))
    monkeypatch.setattr(model_loading, "gc", SimpleNamespace(collect=lambda: 0))
    lora = write_tiny_lora(transformer, tmp_path / "distilled-lora.safetensors", rank=2, scale=0.3, seed=1)
    prefused = _prefused_transformer(transformer, lora, STRENGTH, tmp_path / "prefused-transformer.safetensors")
    others = {c: golden_ltx25_dir / names[c] for c in ("text_encoder", "video_vae", "audio_vae")}

    def run(transformer_file: Path, distilled_lora: LoraSpec | None) -> dict[str, torch.Tensor]:
        pipeline = DFRPipeline(
            ModelFiles.split(transformer=transformer_file, **others),
            golden_ltx25_upsampler,
            gemma_root=None,
            detailing_lora=[LoraSpec(golden_ltx25_dir / more["detailing_ic_lora"], 1.0)],
            temporal_upsampler_path=golden_ltx25_dir / more["temporal_upsampler"],
            distilled_lora=distilled_lora,
            lora_fusion="float32",
            device="cpu",
            dtype=torch.float32,
            progress=False,
        )
        video = VideoRequest(
            height=settings["height"], width=settings["width"], num_frames=settings["num_frames"],
            frame_rate=settings["fps"],
        )  # fmt: skip
        final = pipeline.latents_from_contexts(
            contexts, video=video, noise=SeededNoise(SEED), seed=SEED, temporal_upsample_rounds=1
        )
        return final.stage_latents

    fused = run(transformer, LoraSpec(lora, STRENGTH))
    want = run(prefused, None)
    without = run(transformer, None)
    assert set(fused) == set(want) == set(without)
    stages = ("stage_1.video_latent", "stage_2.video_latent", "round_1.tile_0.video_latent")
    assert all(name in fused for name in stages), sorted(fused)
    for name, expected in want.items():
        torch.testing.assert_close(fused[name], expected, atol=AGREE_ATOL, rtol=0, msg=name)
        assert float((without[name] - expected).abs().max()) > MATTERS, f"{name}: the LoRA does not change it"


def test_a_missing_distilled_lora_is_refused_before_loading(golden_ltx25_dfr_files, tmp_path):
    with pytest.raises(ValueError, match=r"distilled_lora '.*nope\.safetensors': no such file"):
        DFRPipeline(
            golden_ltx25_dfr_files,
            tmp_path / "no-upsampler.safetensors",
            gemma_root=None,
            distilled_lora=LoraSpec(tmp_path / "nope.safetensors", 1.0),
        )
