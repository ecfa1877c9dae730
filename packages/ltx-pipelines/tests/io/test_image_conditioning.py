"""Image conditioning: EXIF orientation, sRGB conversion, H.264 re-compression, cover + crop geometry."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from PIL import Image

from ltx_pipelines.io import (
    MediaError,
    load_image_conditioning,
    read_image_rgb,
    recompress_h264,
    resize_cover_center_crop,
)

RED, BLUE, GREEN = (255, 0, 0), (0, 0, 255), (0, 255, 0)
_EXIF_ORIENTATION = 0x0112


def _save_with_orientation(image: Image.Image, path, orientation: int) -> None:
    exif = Image.Exif()
    exif[_EXIF_ORIENTATION] = orientation
    image.save(path, exif=exif)


def _marked_landscape() -> Image.Image:
    """40 wide x 20 high, black, with a red block in the stored top-left corner."""
    image = Image.new("RGB", (40, 20), (0, 0, 0))
    image.paste(RED, (0, 0, 8, 8))
    return image


@pytest.mark.parametrize(
    ("orientation", "size_hw", "corner"),
    [
        (1, (20, 40), "top_left"),
        (3, (20, 40), "bottom_right"),  # stored upside down
        (6, (40, 20), "top_right"),  # stored rotated 90 degrees counter-clockwise
        (8, (40, 20), "bottom_left"),  # stored rotated 90 degrees clockwise
    ],
)
def test_exif_orientation_is_applied(tmp_path, orientation, size_hw, corner):
    path = tmp_path / f"o{orientation}.png"
    _save_with_orientation(_marked_landscape(), path, orientation)
    pixels = read_image_rgb(path)
    assert pixels.shape == (*size_hw, 3) and pixels.dtype == np.uint8
    h, w = size_hw
    corners = {
        "top_left": pixels[:4, :4],
        "top_right": pixels[:4, w - 4 :],
        "bottom_left": pixels[h - 4 :, :4],
        "bottom_right": pixels[h - 4 :, w - 4 :],
    }
    for name, block in corners.items():
        is_red = bool((block[..., 0] > 200).all() and (block[..., 1:] < 50).all())
        assert is_red == (name == corner), name


def test_modes_become_rgb(tmp_path):
    rgba = tmp_path / "a.png"
    Image.new("RGBA", (6, 4), (10, 20, 30, 0)).save(rgba)
    grey = tmp_path / "g.png"
    Image.new("L", (6, 4), 77).save(grey)
    assert read_image_rgb(rgba)[0, 0].tolist() == [10, 20, 30]
    assert read_image_rgb(grey)[0, 0].tolist() == [77, 77, 77]


def test_missing_and_non_image_files(tmp_path):
    with pytest.raises(MediaError, match="not found"):
        read_image_rgb(tmp_path / "nope.png")
    text = tmp_path / "notes.png"
    text.write_text("hello")
    with pytest.raises(MediaError, match="not an image"):
        load_image_conditioning(text, 32, 32, crf=33)
    with pytest.raises(MediaError, match="not a file"):
        read_image_rgb(tmp_path)


def test_cover_crop_geometry_landscape_source():
    # Left half red, right half blue, 100 x 200 (H x W). Covering 64 x 64 scales by 0.64 to
    # 64 x 128 and keeps the middle 64 columns: left half red, right half blue.
    image = np.zeros((100, 200, 3), np.uint8)
    image[:, :100] = RED
    image[:, 100:] = BLUE
    out = resize_cover_center_crop(torch.from_numpy(image), 64, 64)
    assert out.shape == (1, 3, 64, 64) and out.dtype == torch.float32
    assert torch.allclose(out[0, :, :, :30].mean(dim=(1, 2)), torch.tensor([255.0, 0, 0]))
    assert torch.allclose(out[0, :, :, 34:].mean(dim=(1, 2)), torch.tensor([0.0, 0, 255]))


def test_cover_crop_geometry_cuts_the_long_side():
    # Three horizontal bands (green / red / green) of a 300 x 100 portrait; a 100 x 100 target keeps
    # only the middle band.
    image = np.zeros((300, 100, 3), np.uint8)
    image[:] = GREEN
    image[100:200] = RED
    out = resize_cover_center_crop(torch.from_numpy(image), 100, 100)
    assert out.shape == (1, 3, 100, 100)
    assert torch.allclose(out[0, :, 2:-2], torch.tensor([255.0, 0, 0]).view(3, 1, 1).expand(3, 96, 100))


def test_load_image_conditioning_layout_and_range(tmp_path):
    path = tmp_path / "img.png"
    image = Image.new("RGB", (90, 60), (255, 255, 255))
    image.paste((0, 0, 0), (0, 0, 45, 60))  # left half black
    image.save(path)
    x = load_image_conditioning(path, 64, 96, crf=0, dtype=torch.bfloat16)
    assert x.shape == (1, 3, 1, 64, 96) and x.dtype == torch.bfloat16
    assert x.min() >= -1 and x.max() <= 1
    assert torch.all(x[..., :, :40] == -1) and torch.all(x[..., :, 56:] == 1)


def test_recompression_is_lossy_once_and_skippable():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (33, 47, 3), dtype=np.uint8)
    assert recompress_h264(image, 0) is image
    squeezed = recompress_h264(image, 33)
    assert squeezed.shape == (32, 46, 3)  # 4:2:0 needs even sides
    diff = np.abs(squeezed.astype(int) - image[:32, :46].astype(int))
    assert diff.mean() > 5  # noise does not survive crf 33
    assert abs(squeezed.mean() - image[:32, :46].mean()) < 8  # but the overall level does
    with pytest.raises(ValueError, match="0..51"):
        recompress_h264(image, 52)


def test_crf_changes_the_conditioning(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "noise.png"
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(path)
    pristine = load_image_conditioning(path, 64, 64, crf=0)
    compressed = load_image_conditioning(path, 64, 64, crf=33)
    assert (pristine - compressed).abs().mean() > 0.02


def _huge_png(path, side: int = 20000):
    """A PNG whose header declares side x side pixels (no pixel data is needed: Pillow checks the size on open)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit greyscale
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")
    )
    return path


def test_an_image_over_the_decompression_bomb_limit_is_named(tmp_path):
    """Pillow's DecompressionBombError names no file; the image readers and the --image check do."""
    from ltx_pipelines.cli.flag_group import FlagError
    from ltx_pipelines.cli.request_flags import _checked_image
    from ltx_pipelines.engine.denoising_stage import ImageCondition

    huge = _huge_png(tmp_path / "huge.png")
    with pytest.raises(MediaError, match=re.escape(repr(str(huge))) + " is too large to decode"):
        read_image_rgb(huge)
    with pytest.raises(FlagError, match=re.escape(f"--image {str(huge)!r} is too large")):
        _checked_image(ImageCondition(0, 1.0, path=huge), num_frames=9)
