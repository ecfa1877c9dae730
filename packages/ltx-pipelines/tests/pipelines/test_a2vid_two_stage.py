"""Audio-to-video: the audio latent is encoded once and never changes, the output muxes the input
segment (not a decoded copy), the command line reads any audio container PyAV decodes, and bad audio
flags exit 2 before anything loads."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines import a2vid_two_stage
from ltx_pipelines.a2vid_two_stage import A2VidPipelineTwoStage, AudioInput
from ltx_pipelines.engine.denoising_stage import SeededNoise
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest


def write_tone(path: Path, *, seconds: float, rate: int, codec: str = "pcm_s16le", channels: int = 2) -> np.ndarray:
    """A chirp stereo (or mono) signal written with PyAV; returns the float samples written (channels, N)."""
    n = round(seconds * rate)
    t = np.arange(n) / rate
    # Rising chirps: no two segments of the signal look alike, so a wrong start time shows.
    sweep = 200 * t + 400 * t**2
    tones = [0.4 * np.sin(2 * np.pi * sweep), 0.3 * np.sin(2 * np.pi * 1.5 * sweep + 1.0)]
    wave = np.stack(tones[:channels]).astype(np.float32)
    layout = "stereo" if channels == 2 else "mono"
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.codec_context.layout = layout
        fmt = "s16" if codec == "pcm_s16le" else "fltp"
        block = 1024
        for start in range(0, n, block):
            chunk = wave[:, start : start + block]
            data = (chunk.T * 32767).round().astype(np.int16).reshape(1, -1) if fmt == "s16" else chunk
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(data), format=fmt, layout=layout)
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return wave


def _mp4(path: Path) -> dict:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        fps = float(video.average_rate or video.guessed_rate)
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video)]
    with av.open(str(path)) as container:
        audio = container.streams.audio[0]
        samples = np.concatenate([f.to_ndarray() for f in container.decode(audio)], axis=-1)
        rate = audio.rate
    return {"frames": len(frames), "size": frames[0].shape[:2], "fps": fps,
            "audio": samples, "rate": rate}  # fmt: skip


def test_audio_latent_is_frozen_and_the_input_segment_is_shipped(tiny_checkpoint, tiny_spatial_upsampler):
    pipeline = A2VidPipelineTwoStage(
        tiny_checkpoint, tiny_spatial_upsampler, None, distilled_lora=None, device="cpu", dtype=torch.float32,
        progress=False,
    )  # fmt: skip
    g = torch.Generator().manual_seed(0)
    contexts = TextContexts(torch.randn(1, 128, 32, generator=g), torch.randn(1, 128, 16, generator=g),
                            torch.ones(1, 128, dtype=torch.int64))  # fmt: skip
    negative = TextContexts(torch.randn(1, 128, 32, generator=g), torch.randn(1, 128, 16, generator=g),
                            torch.ones(1, 128, dtype=torch.int64))  # fmt: skip
    wave = torch.rand(2, 22050, generator=g) * 1.6 - 0.8  # 1 s at 22.05 kHz, longer than the video
    generation = pipeline.generate_from_contexts(
        contexts, negative, audio=AudioInput(wave, 22050),
        video=VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0),
        noise=SeededNoise(1), guidance=GuidanceRequest(num_inference_steps=2),
    )  # fmt: skip
    frames = torch.cat(list(generation.frames))
    assert frames.shape == (9, 64, 64, 3)
    encoded = generation.latents["encoded_audio_latent"]
    assert encoded.shape[2] == round(9 / 24 * 25)
    for stage in ("stage_1", "stage_2"):
        assert torch.equal(generation.latents[f"{stage}.audio_latent"], encoded)
    # The video was denoised (it is not its initial noise-free upsampled latent).
    assert not torch.equal(generation.latents["stage_2.video_latent"], generation.latents["upsampled_video_latent"])
    assert generation.audio_sample_rate == 22050
    assert torch.equal(generation.audio, wave[:, : round(9 / 24 * 22050)])


def test_cli_muxes_the_input_segment_and_repeats_with_the_seed(tmp_path, monkeypatch, demo_cache_home,
                                                               write_test_image):  # fmt: skip
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    image = write_test_image(tmp_path / "first.png")
    source = tmp_path / "speech.flac"
    wave = write_tone(source, seconds=2.0, rate=44100, codec="flac")
    outs = []
    for name, seed in (("a", "5"), ("b", "5")):
        out = tmp_path / f"{name}.mp4"
        argv = ["--demo", "--prompt", "a drummer", "--output-path", str(out), "--num-inference-steps", "2",
                "--audio-path", str(source), "--audio-start-time", "0.5", "--seed", seed,
                "--image", str(image), "0", "1.0"]  # fmt: skip
        assert a2vid_two_stage.main(argv) == 0
        outs.append(out)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    got = _mp4(outs[0])
    sidecar = json.loads(outs[0].with_suffix(".json").read_text())
    frames, fps = sidecar["parameters"]["num_frames"], sidecar["parameters"]["frame_rate"]
    assert got["frames"] == frames and got["fps"] == fps
    assert got["size"] == (sidecar["parameters"]["height"], sidecar["parameters"]["width"])
    assert got["rate"] == 44100
    for flag in ("audio_path", "audio_start_time", "audio_max_duration", "negative_prompt", "video_cfg_guidance_scale",
                 "num_inference_steps", "seed", "images"):  # fmt: skip
        assert flag in sidecar["parameters"], flag
    assert sidecar["parameters"]["images"][0]["path"] == str(image)
    # The muxed track is the input from 0.5 s on, for the video's duration, within AAC's tolerance: aligned
    # (no lag) and close in signal-to-noise terms (a decoded copy or another segment would be far off).
    want = wave[:, round(0.5 * 44100) :][:, : round(frames / fps * 44100)]
    assert abs(got["audio"].shape[1] - want.shape[1]) <= 1024  # at most one AAC frame of padding
    body = slice(0, want.shape[1] - 1024)  # the encoder's last frame tapers
    have, want = got["audio"][:, body], want[:, body]
    snr = 10 * np.log10((want**2).sum() / ((have - want) ** 2).sum())
    assert snr > 20, snr
    lags = range(-200, 201)
    scores = [float((np.roll(have, lag, axis=1) * want).sum()) for lag in lags]
    assert lags[int(np.argmax(scores))] == 0


@pytest.mark.parametrize(
    ("case", "fragments"),
    [
        ("missing", ["--audio-path", "no such file"]),
        ("not_media", ["--audio-path", "FFmpeg"]),
        ("no_audio_track", ["--audio-path", "no audio track"]),
        ("negative_start", ["--audio-start-time -1.0", ">= 0"]),
        ("start_after_end", ["--audio-start-time 5.0", "only"]),
        ("zero_duration", ["--audio-max-duration 0.0", "positive"]),
        ("no_flag", ["--audio-path"]),
    ],
)
def test_bad_audio_flags_exit_2_before_anything_loads(tmp_path, capsys, write_test_image, case, fragments):
    good = tmp_path / "in.wav"
    write_tone(good, seconds=1.0, rate=16000)
    path = {"missing": tmp_path / "nope.wav", "not_media": tmp_path / "text.wav",
            "no_audio_track": write_test_image(tmp_path / "still.png")}.get(case, good)  # fmt: skip
    (tmp_path / "text.wav").write_text("not audio")
    out = tmp_path / "out" / "v.mp4"
    argv = ["--demo", "--prompt", "a", "--output-path", str(out), "--audio-path", str(path)]
    extra = {"negative_start": ["--audio-start-time", "-1"], "start_after_end": ["--audio-start-time", "5"],
             "zero_duration": ["--audio-max-duration", "0"]}.get(case, [])  # fmt: skip
    if case == "no_flag":
        argv = argv[:-2]
    with pytest.raises(SystemExit) as info:
        a2vid_two_stage.main(argv + extra)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, err
    assert not out.parent.exists()


def test_help_lists_the_audio_and_video_guidance_flags_with_defaults(capsys):
    with pytest.raises(SystemExit):
        a2vid_two_stage.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("--audio-path", "--audio-start-time", "(default: 0.0)", "--audio-max-duration",
                  "(default: the video's duration", "--video-cfg-guidance-scale", "--a2v-guidance-scale",
                  "--distilled-lora", "--spatial-upsampler-path", "--image", "--max-batch-size"):  # fmt: skip
        assert shown in text, shown
    # The audio is frozen: no audio guidance flag that would do nothing.
    assert "--audio-cfg-guidance-scale" not in text and "--v2a-guidance-scale" not in text


def test_audio_shorter_than_the_video_is_padded_with_a_warning(tmp_path, monkeypatch, demo_cache_home, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))
    short = tmp_path / "short.wav"
    write_tone(short, seconds=0.25, rate=16000)
    argv = ["--demo", "--prompt", "a", "--output-path", str(tmp_path / "o.mp4"), "--audio-path", str(short)]
    with caplog.at_level("WARNING", logger="ltx_pipelines.a2vid_two_stage"):
        a2vid_two_stage.COMMAND.parse(argv)  # the demo video lasts 17 / 24 s
    assert "0.250 s of audio after --audio-start-time 0" in caplog.text
    assert "rest of the soundtrack is silence" in caplog.text
    long = tmp_path / "long.wav"
    write_tone(long, seconds=1.0, rate=16000)
    caplog.clear()
    with caplog.at_level("WARNING", logger="ltx_pipelines.a2vid_two_stage"):
        a2vid_two_stage.COMMAND.parse([*argv[:-1], str(long)])
    assert "silence" not in caplog.text
