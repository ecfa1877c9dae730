"""Text-to-audio: the audio-only transformer reads no video weight (but the audio caption projection
of LTX-2-style files), the command line writes a 16-bit stereo WAV of the asked duration at the
vocoder's rate with a sidecar, the same seed gives the same file, and bad flags exit 2 first."""

from __future__ import annotations

import json
from pathlib import Path

import av
import pytest
import torch
from safetensors.torch import save_file

from ltx_core.loader import build_model, read_checkpoint_config, selected_keys
from ltx_core.model.audio_vae import VOCODER
from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER, VIDEO_ONLY_TRANSFORMER, configure_transformer
from ltx_pipelines import t2a_one_stage


def _wav(path: Path) -> tuple[int, int, str, int]:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.rate, stream.codec_context.channels, stream.codec_context.name, samples


def _run(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / f"{name}.wav"
    argv = ["--demo", "--prompt", "rain on a tin roof", "--output-path", str(out), "--num-inference-steps", "2"]
    assert t2a_one_stage.main([*argv, *extra]) == 0
    return out


def test_cli_writes_a_wav_of_the_asked_duration_and_reads_no_video_weight(
    tmp_path, monkeypatch, demo_cache_home, tiny_checkpoint, read_keys
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    out = _run(tmp_path, "a", "--num-frames", "25", "--frame-rate", "25")
    rate, channels, codec, samples = _wav(out)
    assert channels == 2 and codec == "pcm_s16le"
    # One second of audio: 25 latent steps, decoded at the vocoder's output rate.
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert sidecar["audio"]["sample_rate"] == rate and sidecar["audio"]["samples"] == samples
    assert abs(samples / rate - 1.0) < 0.05, (samples, rate)
    vocoder = build_model(VOCODER, tiny_checkpoint)
    assert rate == int(vocoder.output_sample_rate)
    params = sidecar["parameters"]
    for flag in ("seed", "num_frames", "frame_rate", "negative_prompt", "num_inference_steps",
                 "audio_cfg_guidance_scale", "audio_stg_guidance_scale", "audio_rescale_scale", "audio_stg_blocks",
                 "audio_skip_step", "max_batch_size", "lora", "dtype", "device"):  # fmt: skip
        assert flag in params, flag
    assert "video_cfg_guidance_scale" not in params and "height" not in params
    # The audio-only build read the audio stream and never a video-stream weight of the transformer.
    video_keys = set(selected_keys(tiny_checkpoint, VIDEO_ONLY_TRANSFORMER.ops))
    audio_keys = set(selected_keys(tiny_checkpoint, AUDIO_ONLY_TRANSFORMER.ops))
    assert audio_keys <= set(read_keys)
    assert not video_keys & set(read_keys)
    assert not [k for k in read_keys if k.startswith("vae.")], "the video VAE was read"


def test_same_seed_same_wav_other_seed_other_wav(tmp_path, monkeypatch, demo_cache_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    first = _run(tmp_path, "a", "--num-frames", "9", "--seed", "3")
    again = _run(tmp_path, "b", "--num-frames", "9", "--seed", "3")
    other = _run(tmp_path, "c", "--num-frames", "9", "--seed", "4")
    assert first.read_bytes() == again.read_bytes()
    assert first.read_bytes() != other.read_bytes()


def test_audio_only_build_loads_the_audio_caption_projection(tmp_path, tiny_checkpoint, read_keys):
    """An LTX-2-style file projects captions inside the transformer: the audio-only model needs (and
    loads) `audio_caption_projection.*`, and still no video weight."""
    config = read_checkpoint_config(tiny_checkpoint)
    transformer = dict(config["transformer"])
    for key in ("caption_proj_before_connector", "caption_proj_input_norm", "caption_projection_first_linear",
                "caption_projection_second_linear", "text_encoder_norm_type"):  # fmt: skip
        transformer.pop(key)
    config = {**config, "transformer": transformer}
    torch.manual_seed(0)
    model = configure_transformer(config)
    tensors = {f"model.diffusion_model.{k}": v.contiguous() for k, v in model.state_dict().items()}
    path = tmp_path / "ltx2_style.safetensors"
    save_file(tensors, str(path), metadata={"config": json.dumps(config), "model_version": "2.0.0"})

    audio_only = build_model(AUDIO_ONLY_TRANSFORMER, path)
    projection = [k for k in read_keys if "audio_caption_projection." in k]
    assert projection, "audio_caption_projection.* was not read"
    for key in projection:
        module_key = key.removeprefix("model.diffusion_model.")
        assert torch.equal(audio_only.state_dict()[module_key], tensors[key])
    assert not set(selected_keys(path, VIDEO_ONLY_TRANSFORMER.ops)) & set(read_keys)


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--num-frames", "10"], ["--num-frames 10", "8k+1"]),
        (["--frame-rate", "0"], ["--frame-rate 0"]),
        (["--output-path", "OUT.mp4"], [".wav"]),
        (["--audio-stg-guidance-scale", "1", "--audio-stg-blocks"], ["--audio-stg-blocks"]),
        (["--v2a-guidance-scale", "2"], ["unrecognized arguments"]),
        (["--height", "64"], ["unrecognized arguments"]),
    ],
)
def test_bad_flags_exit_2_before_any_model_loads(tmp_path, capsys, read_keys, flags, fragments):
    out = str(tmp_path / "x.wav")
    argv = ["--demo", "--prompt", "a", "--output-path", out]
    if "--output-path" in flags:
        i = flags.index("--output-path")
        argv[argv.index("--output-path") + 1] = str(tmp_path / "x.mp4")
        flags = flags[:i] + flags[i + 2 :]
    with pytest.raises(SystemExit) as info:
        t2a_one_stage.main([*argv, *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, err
    assert not read_keys and not list(tmp_path.iterdir())


def test_help_lists_every_flag_with_its_default(capsys):
    with pytest.raises(SystemExit):
        t2a_one_stage.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--num-frames", "--frame-rate", "--negative-prompt", "--audio-cfg-guidance-scale",
                 "--audio-stg-guidance-scale", "--audio-rescale-scale", "--audio-stg-blocks", "--audio-skip-step",
                 "--num-inference-steps", "--max-batch-size", "--seed"):  # fmt: skip
        assert flag in text, flag
    assert "(default: 121)" in text and "(default: 7.0)" in text and "(default: [28])" in text


def test_a_length_that_cannot_fit_in_ram_stops_before_any_model_loads(tmp_path, capsys, monkeypatch, demo_cache_home):
    """A CPU run checks its estimate against the host's available RAM (here 100 million frames of audio)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built for a run that cannot fit")

    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", refuse)
    argv = ["--demo", "--prompt", "rain", "--output-path", str(tmp_path / "a.wav"), "--device", "cpu"]
    with pytest.raises(SystemExit) as info:
        t2a_one_stage.main([*argv, "--num-frames", "100000001"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "RAM is available" in err and "GiB" in err
    assert not (tmp_path / "a.wav").exists()
