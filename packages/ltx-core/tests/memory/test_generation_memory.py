"""The phase-by-phase estimate of a generation and `--offload auto`'s choice, on hand-made sizes (no model is
built), and the sizes read from real files and the released key list."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from ltx_core.generation_memory import (
    WEIGHT_FORMAT_BYTES,
    GenerationSizes,
    GenerationWorkload,
    TextEncoderSize,
    estimate_generation,
    text_encoder_size_of,
    video_workload,
)
from ltx_core.memory_estimate import (
    InsufficientMemoryError,
    TransformerSize,
    decoder_values_per_pixel,
    vae_decode_bytes,
)
from ltx_core.offload_auto import check_generation_fits, choose_offload
from ltx_core.runtime import RuntimeOptions

GIB = 2**30
M = 10**6

# A made-up model set, in round parameter counts: a 20-block transformer (500 M parameters a block, half in
# fp8-able Linears: 19 GiB in bf16, 14.3 in fp8, 2.2 streamed), a 10-layer text encoder (200 M a layer in
# Linears: 4.7 GiB in bf16, 2.8 in fp8, 1.7 streamed) and small decoders.
TRANSFORMER = TransformerSize(
    non_block=200 * M, non_block_narrow=0, block=500 * M, block_narrow=250 * M, num_blocks=20,
    video_dim=1024, audio_dim=512, adaln_rows=9,
)  # fmt: skip
TEXT = TextEncoderSize(
    layer_linear=200 * M, layer_other=0, num_layers=10, embedding=500 * M, other=0,
    hidden_size=1024, intermediate_size=4096, num_heads=8, head_dim=128, num_kv_heads=4,
)  # fmt: skip
SIZES = GenerationSizes(
    transformer=TRANSFORMER, text_encoder=TEXT, text_embeddings=100 * M, text_embeddings_dims=(1024, 512),
    video_encoder=50 * M, video_decoder=50 * M, audio_decoder=10 * M, vocoder=10 * M, upsampler=20 * M,
    upsampler_mid_channels=128,
)  # fmt: skip
# The demo's tiny conv VAE decoder and vocoder (ltx_pipelines' demo set), as their configs give them.
_BLOCK = {"num_layers": 1}
DEMO_VAE = {
    "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3, "latent_channels": 128,
    "patch_size": 4, "norm_layer": "pixel_norm", "latent_log_var": "uniform", "spatial_padding_mode": "zeros",
    "timestep_conditioning": False, "causal_decoder": False, "decoder_base_channels": 4,
    "encoder_blocks": [["res_x", _BLOCK], ["compress_space_res", {"multiplier": 1}],
                       ["compress_time_res", {"multiplier": 1}], ["compress_all_res", {"multiplier": 1}],
                       ["compress_all_res", {"multiplier": 2}]],
    "decoder_blocks": [["res_x", _BLOCK], ["compress_space", {"multiplier": 2}], ["res_x", _BLOCK],
                       ["compress_time", {"multiplier": 2}], ["res_x", _BLOCK], ["compress_all", {"multiplier": 1}],
                       ["res_x", _BLOCK], ["compress_all", {"multiplier": 2}], ["res_x", _BLOCK]],
}  # fmt: skip
DEMO_VOCODER = {
    "vocoder": {"stereo": True, "upsample_initial_channel": 16, "upsample_rates": [10, 4, 2, 2]},
    "bwe": {"stereo": True, "upsample_initial_channel": 16, "upsample_rates": [6, 5, 8],
            "input_sampling_rate": 16000, "output_sampling_rate": 48000},
}  # fmt: skip
WORK = GenerationWorkload(shape=video_workload(256, 384, 49, 24.0), two_stage=True, prompt_tokens=128)


def test_text_encoder_weights_in_each_format():
    bf16 = TEXT.resident_bytes("full", torch.bfloat16)
    fp8 = TEXT.resident_bytes("fp8", torch.bfloat16)
    ram = TEXT.resident_bytes("stream-ram", torch.bfloat16)
    disk = TEXT.resident_bytes("stream-disk", torch.bfloat16)
    assert bf16 == ((500 + 10 * 200) * M * 2, 0)
    assert fp8 == (500 * M * 2 + 10 * 200 * M, 0)  # Linear weights one byte, the embedding in bf16
    assert ram == ((500 + 2 * 200) * M * 2, 10 * 200 * M * 2)  # two layers on the device, all in RAM
    assert disk == ((500 + 2 * 200) * M * 2, 2 * 200 * M * 2)
    q8 = replace(TEXT, weight_format="Q8_0").resident_bytes("full", torch.bfloat16)[0]
    q4 = replace(TEXT, weight_format="Q4_K_M").resident_bytes("full", torch.bfloat16)[0]
    assert q8 == int(500 * M * 34 / 32) + int(10 * int(200 * M * 34 / 32))
    assert q4 < q8 < fp8[0] + 500 * M  # Q4_K_M about 5.2 bits, Q8_0 8.5 bits a weight
    assert 4.5 < 8 * WEIGHT_FORMAT_BYTES["Q4_K_M"] < 5.5


def test_the_peak_is_the_largest_phase_not_the_sum():
    e = estimate_generation(SIZES, WORK)
    names = [p.name for p in e.phases]
    assert names == [
        "text encoder", "text embeddings", "stage 1", "upsampler", "stage 2", "audio decode", "video decode",
        "video write",
    ]  # fmt: skip
    assert e.peak == max(p.device for p in e.phases) < sum(p.device for p in e.phases)
    # The transformer stays loaded while the upsampler runs.
    assert e.phase("upsampler").weights == e.phase("stage 2").weights + 20 * M * 2
    assert e.phase("text encoder").weights == (500 + 2000) * M * 2
    enhanced = estimate_generation(SIZES, replace(WORK, enhance=True))
    assert enhanced.phases[0].name == "prompt enhancer" and enhanced.phases[0].weights == (500 + 2000) * M * 2


@pytest.mark.parametrize(
    ("free_gib", "transformer", "text_encoder"),
    [
        (100, "full", "full"),
        (18, "fp8", "full"),
        (5.5, "stream-ram", "full"),
        (3.5, "stream-ram", "fp8"),
        (2.6, "stream-ram", "stream-ram"),
    ],
)
def test_auto_picks_the_fastest_mode_that_fits_for_each_model(free_gib, transformer, text_encoder):
    choice = choose_offload(SIZES, WORK, free_bytes=int(free_gib * GIB), free_host_bytes=64 * GIB)
    assert (choice.transformer.mode, choice.text_encoder.mode) == (transformer, text_encoder)
    assert choice.fits and choice.cell() == f"{transformer} / {text_encoder}"
    lines = choice.log_lines()
    assert len(lines) == 2 and all("GiB" in line for line in lines)
    assert lines[0].startswith(f"--offload auto: transformer: {transformer}: needs ")


def test_auto_streams_from_disk_when_the_host_ram_cannot_hold_the_blocks():
    choice = choose_offload(SIZES, WORK, free_bytes=int(2.6 * GIB), free_host_bytes=8 * GIB)
    assert (choice.transformer.mode, choice.text_encoder.mode) == ("stream-disk", "stream-ram")
    assert "stream-ram needs 18.6 GiB of host RAM, 7.2 GiB usable" in choice.transformer.reason


def test_in_host_ram_streaming_from_ram_is_never_picked():
    choice = choose_offload(SIZES, WORK, free_bytes=int(5.5 * GIB), in_host_ram=True)
    assert choice.transformer.mode == "stream-disk"
    assert "stream-ram" not in choice.transformer.reason


def test_nothing_fits_says_no_with_the_numbers():
    choice = choose_offload(SIZES, WORK, free_bytes=GIB // 4, free_host_bytes=64 * GIB)
    assert not choice.fits and choice.cell() == "no"
    assert "no mode fits 230 MiB of device memory" in choice.transformer.reason


def test_explicit_flags_that_do_not_fit_name_the_phases_and_what_auto_would_pick():
    with pytest.raises(
        InsufficientMemoryError,
        match="GiB peak in upsampler .*auto would pick transformer stream-ram, text encoder full",
    ):
        check_generation_fits(
            SIZES, WORK, transformer_options=RuntimeOptions(), text_encoder_mode="full", free_bytes=int(5.5 * GIB),
            free_host_bytes=64 * GIB,
        )  # fmt: skip
    fits = check_generation_fits(
        SIZES, WORK, transformer_options=RuntimeOptions(offload="cpu"), text_encoder_mode="full",
        free_bytes=int(5.5 * GIB), free_host_bytes=64 * GIB,
    )  # fmt: skip
    assert fits.transformer_mode == "stream-ram"


def test_the_decoder_largest_map_per_output_pixel():
    """The released decoder keeps 128 channels at a quarter of the output's height and width (8 values a pixel):
    the former estimate took 128 values a pixel, 16 times too many (50 GiB for a 384x576x97 demo run)."""
    assert decoder_values_per_pixel(DEMO_VAE) == 3.0  # its output is its largest map
    released = json.loads(json.dumps(DEMO_VAE))
    released.update(decoder_base_channels=128)
    released["decoder_blocks"] = [
        ["res_x", {"num_layers": 4}], ["compress_space", {"multiplier": 2}], ["res_x", {"num_layers": 6}],
        ["compress_time", {"multiplier": 2}], ["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 1}],
        ["res_x", {"num_layers": 2}], ["compress_all", {"multiplier": 2}], ["res_x", {"num_layers": 2}],
    ]  # fmt: skip
    assert decoder_values_per_pixel(released) == 8.0
    # A demo run at 384x576x97 (one 80-frame tile, float32): well under 1 GiB of maps; 128 values a pixel made
    # it over 30 GiB and refused the run.
    tile = replace(video_workload(384, 576, 97, 24.0), vae_values_per_pixel=3.0)
    assert (
        vae_decode_bytes(tile, torch.float32)
        < GIB
        < 30 * GIB
        < vae_decode_bytes(replace(tile, vae_values_per_pixel=128.0), torch.float32)
    )


@pytest.mark.slow  # builds and loads a tiny Gemma through transformers
def test_text_encoder_size_from_a_gemma_folder_counts_every_weight(tmp_path):
    from ltx_core.text_encoders.gemma.tiny import build_tiny_gemma_folder

    folder = build_tiny_gemma_folder(tmp_path / "gemma", hidden_size=24, num_layers=3, seed=0)
    size = text_encoder_size_of(folder)
    from transformers import Gemma3ForConditionalGeneration

    model = Gemma3ForConditionalGeneration.from_pretrained(folder)
    assert size.params == sum(p.numel() for p in model.parameters())
    vocab = model.config.text_config.vocab_size
    assert size.num_layers == 3 and size.layer_linear > 0 and size.embedding == vocab * 24


def test_the_vocoder_largest_map_per_output_sample():
    """Each generator stage halves the channels as it upsamples; the bandwidth extension's last stages hold the
    most per 48 kHz sample (16 channels x stereo at the released sizes; 2 x stereo for the demo's)."""
    from ltx_core.memory_estimate import vocoder_values_per_sample

    assert vocoder_values_per_sample(DEMO_VOCODER) == 4.0
    released = json.loads(json.dumps(DEMO_VOCODER))
    released["vocoder"].update(upsample_initial_channel=1536, upsample_rates=[5, 2, 2, 2, 2, 2])
    released["bwe"].update(upsample_initial_channel=512, upsample_rates=[6, 5, 2, 2, 2])
    assert vocoder_values_per_sample(released) == 32.0


def test_in_host_ram_decoding_and_writing_do_not_add_up_and_the_vocoder_heap_stays():
    small = replace(SIZES, transformer=replace(TRANSFORMER, num_blocks=1), text_encoder=None)
    e = estimate_generation(small, GenerationWorkload(shape=video_workload(512, 768, 241, 24.0)), dtype=torch.float32)
    decode, write, audio = e.phase("video decode"), e.phase("video write"), e.phase("audio decode")
    # The decoder is freed before the frames are encoded: the host peak takes the larger of the two, each on
    # top of the vocoder's retained heap.
    assert e.host_peak == max(decode.device + decode.host, write.host) + audio.activations
    assert e.host_peak < decode.device + decode.host + write.host + audio.activations
    assert e.peak == max(p.device for p in e.phases)  # on a device: the host's share is counted apart
