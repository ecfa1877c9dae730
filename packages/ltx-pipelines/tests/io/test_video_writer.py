"""MP4/WAV writing: stream facts read back with PyAV, atomic replacement, overwrite refusal."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from ltx_pipelines.io import MediaError, fps_fraction, rgb_to_yuv420p_bt709, write_audio, write_video
from ltx_pipelines.io.atomic_files import OutputExistsError

AAC_FRAME = 1024  # samples per AAC frame


def _chunks(frames: torch.Tensor, size: int) -> Iterator[torch.Tensor]:
    for start in range(0, frames.shape[0], size):
        yield frames[start : start + size]


def _decoded_audio_samples(path: Path) -> tuple[int, int]:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        total = sum(frame.samples for frame in container.decode(stream))
        return total, stream.codec_context.channels


@pytest.mark.parametrize(
    ("fps", "expected_rate", "sample_rate"),
    [
        (24.0, Fraction(24), 48000),
        (25.0, Fraction(25), 24000),
        (30.0, Fraction(30), 48000),
        (23.976, Fraction(24000, 1001), 48000),
    ],
)
def test_round_trip_stream_facts(tmp_path, make_frames, stereo_tone, fps, expected_rate, sample_rate):
    frames = make_frames(17, 64, 96)
    n_audio = round(17 / float(expected_rate) * sample_rate)
    out = tmp_path / "clip.mp4"
    written = write_video(
        out, _chunks(frames, 8), fps=fps, audio=stereo_tone(n_audio, sample_rate), audio_sample_rate=sample_rate
    )
    assert written.path == out and written.frames == 17

    with av.open(str(out)) as container:
        video = container.streams.video[0]
        assert video.codec_context.name == "h264"
        assert video.codec_context.format.name == "yuv420p"
        assert (video.codec_context.width, video.codec_context.height) == (96, 64)
        assert video.average_rate == expected_rate
        assert video.codec_context.colorspace == 1  # AVCOL_SPC_BT709
        assert video.codec_context.color_range == 1  # MPEG / limited
        audio = container.streams.audio[0]
        assert audio.codec_context.name == "aac"
        assert audio.rate == sample_rate
        decoded = sum(1 for _ in container.decode(video))
    assert decoded == 17
    samples, channels = _decoded_audio_samples(out)
    assert channels == 2
    assert abs(samples - n_audio) <= AAC_FRAME


def test_pixels_survive_encoding(tmp_path):
    # Flat colours in both accepted input types; x264 at crf 19 keeps flat areas within a few levels.
    colour = torch.tensor([0.8, 0.3, 0.1])
    float_chunk = colour.expand(9, 32, 32, 3).clone()
    uint8_chunk = (colour * 255).round().to(torch.uint8).expand(8, 32, 32, 3).clone()
    out = tmp_path / "flat.mp4"
    write_video(out, iter([float_chunk, uint8_chunk]), fps=24)
    with av.open(str(out)) as container:
        decoded = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert decoded.shape == (17, 32, 32, 3)
    assert np.abs(decoded.astype(np.float64) / 255.0 - colour.numpy()).max() < 4 / 255


def test_a_single_tensor_and_silent_output(tmp_path, make_frames):
    out = tmp_path / "silent.mp4"
    write_video(out, make_frames(9, 32, 64), fps=24)
    with av.open(str(out)) as container:
        assert len(container.streams.audio) == 0
        assert container.streams.video[0].frames == 9


def test_failing_iterator_leaves_nothing(tmp_path, make_frames):
    def broken() -> Iterator[torch.Tensor]:
        yield make_frames(8, 32, 32)
        raise RuntimeError("decoder exploded")

    out = tmp_path / "never.mp4"
    with pytest.raises(RuntimeError, match="decoder exploded"):
        write_video(out, broken(), fps=24)
    assert list(tmp_path.iterdir()) == []


def test_failure_while_overwriting_keeps_the_original(tmp_path, make_frames):
    out = tmp_path / "keep.mp4"
    out.write_bytes(b"precious")

    def broken() -> Iterator[torch.Tensor]:
        yield make_frames(8, 32, 32)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_video(out, broken(), fps=24, overwrite=True)
    assert out.read_bytes() == b"precious"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.mp4"]


def test_refuses_to_overwrite_without_the_flag(tmp_path, make_frames):
    out = tmp_path / "exists.mp4"
    out.write_bytes(b"precious")
    with pytest.raises(OutputExistsError) as info:
        write_video(out, make_frames(9, 32, 32), fps=24)
    assert str(out) in str(info.value) and "--overwrite" in str(info.value)
    assert out.read_bytes() == b"precious"

    write_video(out, make_frames(9, 32, 32), fps=24, overwrite=True)
    with av.open(str(out)) as container:
        assert container.streams.video[0].frames == 9


def test_frame_count_mismatch_is_an_error(tmp_path, make_frames):
    out = tmp_path / "short.mp4"
    with pytest.raises(MediaError, match="expected 17 video frames"):
        write_video(out, make_frames(9, 32, 32), fps=24, expected_frames=17)
    assert not out.exists()


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        (iter([]), "empty"),
        (torch.zeros(4, 33, 32, 3), "even frame size"),
        (torch.zeros(4, 32, 32), r"\(F, H, W, 3\)"),
        (iter([torch.zeros(2, 32, 32, 3), torch.zeros(2, 64, 32, 3)]), "share one frame size"),
    ],
)
def test_bad_frames_are_rejected(tmp_path, frames, match):
    out = tmp_path / "bad.mp4"
    with pytest.raises(MediaError, match=match):
        write_video(out, frames, fps=24)
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments(tmp_path, make_frames):
    with pytest.raises(MediaError, match="accepted extensions"):
        write_video(tmp_path / "clip.gif", make_frames(1, 32, 32), fps=24)
    with pytest.raises(ValueError, match="positive"):
        write_video(tmp_path / "clip.mp4", make_frames(1, 32, 32), fps=0)
    with pytest.raises(ValueError, match="audio_sample_rate"):
        write_video(tmp_path / "clip.mp4", make_frames(1, 32, 32), fps=24, audio=torch.zeros(2, 100))
    with pytest.raises(MediaError, match=r"\(2, N\)"):
        write_video(
            tmp_path / "clip.mp4", make_frames(1, 32, 32), fps=24, audio=torch.zeros(3, 100), audio_sample_rate=8000
        )
    assert list(tmp_path.iterdir()) == []


def test_fps_fraction():
    assert fps_fraction(24) == 24
    assert fps_fraction(23.976) == Fraction(24000, 1001)
    assert fps_fraction(29.97) == Fraction(30000, 1001)
    assert fps_fraction(59.94) == Fraction(60000, 1001)
    assert fps_fraction(12.5) == Fraction(25, 2)
    for bad in (0, -24, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            fps_fraction(bad)


def test_yuv_bt709_code_values():
    # BT.709 limited-range codes of the primaries / white / black (Rec. 709 tables): Y, Cb, Cr.
    expected = {
        (1.0, 1.0, 1.0): (235, 128, 128),
        (0.0, 0.0, 0.0): (16, 128, 128),
        (1.0, 0.0, 0.0): (63, 102, 240),
        (0.0, 1.0, 0.0): (173, 42, 26),
        (0.0, 0.0, 1.0): (32, 240, 118),
    }
    for rgb, (y, cb, cr) in expected.items():
        planes = rgb_to_yuv420p_bt709(torch.tensor(rgb).expand(1, 4, 4, 3))
        assert planes.shape == (1, 6, 4)
        flat = planes.reshape(-1)
        assert flat[:16].tolist() == [y] * 16
        assert flat[16:20].tolist() == [cb] * 4
        assert flat[20:24].tolist() == [cr] * 4


def test_wav_round_trip(tmp_path, stereo_tone):
    wave = stereo_tone(16000, 16000)
    out = write_audio(tmp_path / "voice.wav", wave, 16000)
    with av.open(str(out)) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name == "pcm_s16le" and stream.rate == 16000
        decoded = np.concatenate([f.to_ndarray().reshape(-1, 2).T for f in container.decode(stream)], axis=1)
    assert decoded.shape == (2, 16000)
    assert np.abs(decoded / 32767.0 - wave.numpy()).max() < 1e-4
    with pytest.raises(OutputExistsError):
        write_audio(out, wave, 16000)


def test_the_same_frames_always_encode_to_the_same_file(tmp_path):
    # x264's macroblock tree made about one encode in ten differ (on the writer's worker thread) before
    # it was turned off; twelve encodes of textured, moving frames would catch that most of the time.
    generator = torch.Generator().manual_seed(3)
    base = torch.rand(1, 64, 96, 3, generator=generator)
    frames = torch.cat([torch.roll(base, shifts=2 * i, dims=2) for i in range(17)]) * 0.8 + 0.1
    audio = torch.sin(torch.arange(24_000 * 17 // 24) / 7.0).expand(2, -1) * 0.3
    written = []
    for i in range(12):
        path = tmp_path / f"run{i}.mp4"
        write_video(path, iter([frames[:9], frames[9:]]), fps=24, audio=audio, audio_sample_rate=24_000)
        written.append(path.read_bytes())
    assert all(data == written[0] for data in written[1:])


@pytest.mark.parametrize(("num_frames", "decoded_seconds"), [(17, 0.69), (25, 1.01)])
def test_audio_shorter_than_the_video_is_padded_with_silence_to_its_duration(
    tmp_path, make_frames, stereo_tone, num_frames, decoded_seconds
):
    """The audio decoder gives (latent frames - 1) * 4 + 1 mel frames: 0.69 s for 17 frames at 24 fps (0.708 s),
    1.01 s for 25 (1.042 s), as in the reference. The written audio lasts as long as the video."""
    rate = 48000
    tone = stereo_tone(round(decoded_seconds * rate), rate)
    out = tmp_path / "clip.mp4"
    written = write_video(out, make_frames(num_frames, 64, 96), fps=24.0, audio=tone, audio_sample_rate=rate)
    video_samples = -(-num_frames * rate // 24)  # ceil(frames / fps * rate)
    assert written.audio_samples == video_samples
    samples, _ = _decoded_audio_samples(out)
    assert samples >= video_samples
    with av.open(str(out)) as container:
        decoded = np.concatenate([f.to_ndarray() for f in container.decode(container.streams.audio[0])], axis=1)
    # The tone is kept; what follows it is silence (AAC leaves only small ringing there).
    tail = decoded[:, tone.shape[1] + 2 * AAC_FRAME : video_samples]
    assert tail.size == 0 or float(np.abs(tail).max()) < 0.05
    longer = write_video(tmp_path / "long.mp4", make_frames(9, 64, 96), fps=24.0, audio=tone, audio_sample_rate=rate)
    assert longer.audio_samples == tone.shape[1]  # longer audio is not cut
