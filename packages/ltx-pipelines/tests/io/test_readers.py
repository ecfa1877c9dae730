"""Reading videos and audio tracks back (input side of video/audio-conditioned pipelines)."""

from __future__ import annotations

import re

import pytest
import torch

from ltx_pipelines.io import (
    MediaError,
    check_decodes,
    frames_to_model_input,
    iter_video_frames,
    probe_video,
    read_audio,
    read_video,
    write_audio,
    write_video,
)


@pytest.fixture
def clip(tmp_path, stereo_tone):
    """17 frames of 64 x 96 at 25 fps, frame i filled with grey level 10 * i, with 0.68 s of stereo tone."""
    frames = torch.stack([torch.full((64, 96, 3), 10 * i, dtype=torch.uint8) for i in range(17)])
    path = tmp_path / "in.mp4"
    write_video(path, frames, fps=25, audio=stereo_tone(32640, 48000), audio_sample_rate=48000)
    return path


def test_probe(clip):
    info = probe_video(clip)
    assert (info.frames, info.height, info.width) == (17, 64, 96)
    assert info.fps == pytest.approx(25.0)
    assert info.has_audio and info.audio_sample_rate == 48000 and info.audio_channels == 2


def test_read_video_window(clip):
    full = read_video(clip)
    assert full.frames.shape == (17, 64, 96, 3) and full.frames.dtype == torch.uint8
    assert full.fps == pytest.approx(25.0)
    part = read_video(clip, start_frame=4, max_frames=5)
    assert part.frames.shape[0] == 5
    levels = part.frames.float().mean(dim=(1, 2, 3))
    assert torch.allclose(levels, torch.tensor([40.0, 50, 60, 70, 80]), atol=3)
    assert len(list(iter_video_frames(clip, max_frames=0))) == 0


def test_read_video_resized(clip):
    resized = read_video(clip, max_frames=2, size=(32, 32))
    assert resized.frames.shape == (2, 32, 32, 3) and resized.frames.dtype == torch.uint8


def test_frames_to_model_input(clip):
    frames = read_video(clip, max_frames=9).frames
    x = frames_to_model_input(frames, 32, 64)
    assert x.shape == (1, 3, 9, 32, 64)
    assert x.min() >= -1 and x.max() <= 1
    # frame 0 is black, frame 8 is level 80
    assert x[0, :, 0].mean().item() == pytest.approx(-1.0, abs=0.03)
    assert x[0, :, 8].mean().item() == pytest.approx(80 / 127.5 - 1, abs=0.03)


def test_read_audio_window_and_resample(clip, stereo_tone):
    track = read_audio(clip)
    assert track.sample_rate == 48000 and track.waveform.shape[0] == 2
    assert abs(track.waveform.shape[1] - 32640) <= 1024
    window = read_audio(clip, start_time=0.2, max_duration=0.25, sample_rate=16000)
    assert window.sample_rate == 16000 and window.waveform.shape == (2, 4000)
    assert window.duration == pytest.approx(0.25)


def test_read_audio_from_wav_is_exact(tmp_path, stereo_tone):
    wave = stereo_tone(8000, 16000)
    path = write_audio(tmp_path / "a.wav", wave, 16000)
    track = read_audio(path, start_time=0.1, max_duration=0.2)
    assert track.waveform.shape == (2, 3200)
    assert torch.allclose(track.waveform, wave[:, 1600:4800], atol=1e-4)


def test_reader_errors(tmp_path, clip, make_frames):
    silent = tmp_path / "silent.mp4"
    write_video(silent, make_frames(9, 32, 32), fps=24)
    with pytest.raises(MediaError, match="no audio track"):
        read_audio(silent)
    with pytest.raises(MediaError, match="not found"):
        read_video(tmp_path / "missing.mp4")
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(MediaError, match="not a media file"):
        probe_video(junk)
    wav = write_audio(tmp_path / "only.wav", torch.zeros(2, 100), 8000)
    with pytest.raises(MediaError, match="no video stream"):
        read_video(wav)
    with pytest.raises(MediaError, match="no audio at start_time"):
        read_audio(clip, start_time=5.0)


def _damage_media_data(path, start: int, length: int, fill: int | None = None) -> None:
    """Overwrite `length` bytes of the file's media data (after the `mdat` box header, from `start`), leaving the
    container's header intact: it opens and probes, and fails only when the damaged packets are decoded."""
    data = bytearray(path.read_bytes())
    begin = data.find(b"mdat") + 4 + start
    for i in range(begin, begin + length):
        data[i] = fill if fill is not None else (data[i] * 7 + 13) % 256
    path.write_bytes(bytes(data))


@pytest.fixture
def damaged_video(tmp_path, stereo_tone):
    """Noise frames (large packets) with a tone; the video packets are damaged, the header is not."""
    frames = torch.randint(0, 256, (17, 64, 64, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    path = tmp_path / "damaged.mp4"
    write_video(path, frames, fps=24, audio=stereo_tone(48000, 48000), audio_sample_rate=48000)
    _damage_media_data(path, 200, 4000)
    return path


@pytest.fixture
def damaged_audio(tmp_path, stereo_tone):
    """Two seconds of AAC in an .m4a whose packets after the first few are overwritten."""
    import av

    path = tmp_path / "damaged.m4a"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=48000)
        stream.layout = "stereo"
        frame = av.AudioFrame.from_ndarray(stereo_tone(96000, 48000).numpy(), format="fltp", layout="stereo")
        frame.sample_rate = 48000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    _damage_media_data(path, 3000, 6000, fill=0xFF)
    return path


def test_a_damaged_file_is_named_where_it_is_decoded(damaged_video, damaged_audio):
    assert probe_video(damaged_video).frames == 17  # the header alone does not show the damage
    named = re.escape(f"{str(damaged_video)!r}: its video stream") + ".*damaged or truncated"
    with pytest.raises(MediaError, match=named):
        read_video(damaged_video)
    with pytest.raises(MediaError, match=named):
        check_decodes(damaged_video)
    with pytest.raises(
        MediaError, match=re.escape(f"{str(damaged_audio)!r}: its audio track") + ".*damaged or truncated"
    ):
        read_audio(damaged_audio)


def test_damaged_inputs_are_refused_while_the_flags_are_read(damaged_video, damaged_audio):
    """retake's --video-path and a2vid's --audio-path decode the whole stream at parse time (exit 2)."""
    import argparse

    from ltx_pipelines.cli.media_inputs import audio_file, video_file

    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"{str(damaged_video)!r}: its video stream")):
        video_file(str(damaged_video))
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"{str(damaged_audio)!r}: its audio track")):
        audio_file(str(damaged_audio))
