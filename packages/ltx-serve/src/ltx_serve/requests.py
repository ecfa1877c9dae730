"""Checking a `POST /v1/videos` request against the server's limits, before anything is queued.

Each refusal is one `ApiError` naming the field, the value and what is accepted; the API answers it as a
4xx in OpenAI's error shape. The accepted request becomes the job's stored `request` dict (what the worker
turns into pipeline flags).
"""

from __future__ import annotations

import io
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_serve.pipelines import DEFAULT_PIPELINES, ServedPipeline, describe


class ApiError(Exception):
    """A request refused with `status`, in OpenAI's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str = "invalid_value",
        type_: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type_
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (`--max-*` flags)."""

    max_width: int = 1920
    max_height: int = 1920
    max_frames: int = 257
    max_seconds: float = 20.0
    max_prompt_chars: int = 4000
    max_body_bytes: int = 20 * 1024 * 1024
    default_size: str = "768x512"
    default_seconds: str = "4"
    default_frame_rate: float = 25.0
    loras: dict[str, str] = field(default_factory=dict)
    """The LoRAs the workers loaded, by name (file stem) -> path; a request may set their strengths."""
    pipelines: dict[str, ServedPipeline] = field(default_factory=lambda: served_pipelines(DEFAULT_PIPELINES))
    """The pipelines the workers hold, by name; the first is a request's default."""


def served_pipelines(names: tuple[str, ...]) -> dict[str, ServedPipeline]:
    return {name: describe(name) for name in names}


def _int(value: Any, param: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise ApiError(400, f"{param} {value!r}: expected an integer", param=param) from None
    return number


def _float(value: Any, param: str) -> float:
    try:
        number = float(str(value))
    except ValueError:
        raise ApiError(400, f"{param} {value!r}: expected a number", param=param) from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ApiError(400, f"{param} {value!r}: expected a finite number", param=param)
    return number


def _size(value: Any, limits: Limits, multiple: int) -> tuple[int, int]:
    text = str(value)
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ApiError(400, f"size {text!r}: expected WIDTHxHEIGHT, e.g. {limits.default_size}", param="size")
    width, height = int(parts[0]), int(parts[1])
    if width % multiple or height % multiple or not width or not height:
        raise ApiError(400, f"size {text!r}: width and height must be positive multiples of {multiple}", param="size")
    if width > limits.max_width or height > limits.max_height:
        raise ApiError(
            400, f"size {text!r}: over this server's limit of {limits.max_width}x{limits.max_height}", param="size"
        )
    return width, height


def _frames_for(seconds: float, frame_rate: float) -> int:
    """The 8k+1 frame count closest to `seconds` at `frame_rate` (the VAE packs 8 frames per latent)."""
    return max(0, round((seconds * frame_rate - 1) / 8)) * 8 + 1


def check_request(fields: dict[str, Any], limits: Limits, image: bytes | None) -> tuple[dict[str, Any], bytes | None]:
    """The job request from the form or JSON `fields`, and the checked image bytes (or ApiError)."""
    prompt = _prompt(fields.get("prompt"), "prompt", limits)
    served = _pipeline(fields.get("pipeline"), limits)
    width, height = _size(fields.get("size") or limits.default_size, limits, served.spatial_multiple)
    frame_rate, num_frames = _length(fields, limits)
    request: dict[str, Any] = {
        "prompt": prompt,
        "pipeline": served.name,
        "seed": _seed(fields.get("seed")),
        "width": width,
        "height": height,
        "num_frames": num_frames,
        "frame_rate": frame_rate,
        "model": str(fields.get("model") or "ltx-2"),
        "loras": _loras(fields.get("loras"), limits),
        "images": [],
    }
    if fields.get("negative_prompt") not in (None, ""):
        if not served.guided:
            raise ApiError(
                400,
                f"negative_prompt: the {served.name} pipeline runs without guidance and takes none "
                f"(guided pipelines on this server: {', '.join(_guided(limits)) or 'none'})",
                param="negative_prompt",
            )
        request["negative_prompt"] = _prompt(fields["negative_prompt"], "negative_prompt", limits)
    checked_image = None
    if image is not None:
        checked_image = _check_image(image)
        request["images"] = [_image_placement(fields, num_frames)]
    return request, checked_image


def _prompt(value: Any, param: str, limits: Limits) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, f"{param}: required, a non-empty string", param=param, code="missing_required_parameter")
    if len(value) > limits.max_prompt_chars:
        raise ApiError(
            400, f"{param}: {len(value)} characters, over this server's limit of {limits.max_prompt_chars}", param=param
        )
    return value


def _pipeline(value: Any, limits: Limits) -> ServedPipeline:
    """The served pipeline a request names (default: the first the server was started with)."""
    name = str(value) if value not in (None, "") else next(iter(limits.pipelines))
    if name not in limits.pipelines:
        raise ApiError(400, f"pipeline {name!r}: this server runs {', '.join(limits.pipelines)}", param="pipeline")
    return limits.pipelines[name]


def _guided(limits: Limits) -> list[str]:
    return [name for name, served in limits.pipelines.items() if served.guided]


def _length(fields: dict[str, Any], limits: Limits) -> tuple[float, int]:
    """(frame rate, frame count) within the limits; `num_frames` wins over OpenAI's `seconds`."""
    frame_rate = _float(fields.get("frame_rate") or limits.default_frame_rate, "frame_rate")
    if not 1 <= frame_rate <= 120:
        raise ApiError(400, f"frame_rate {frame_rate:g}: accepted 1..120", param="frame_rate")
    if fields.get("num_frames") not in (None, ""):
        num_frames = _int(fields["num_frames"], "num_frames")
        if num_frames < 1 or (num_frames - 1) % 8:
            raise ApiError(400, f"num_frames {num_frames}: must be 8k+1 (1, 9, 17, ..., 121)", param="num_frames")
    else:
        seconds = _float(fields.get("seconds") or limits.default_seconds, "seconds")
        if seconds <= 0 or seconds > limits.max_seconds:
            raise ApiError(400, f"seconds {seconds:g}: accepted (0, {limits.max_seconds:g}]", param="seconds")
        num_frames = _frames_for(seconds, frame_rate)
    if num_frames > limits.max_frames:
        raise ApiError(
            400, f"num_frames {num_frames}: over this server's limit of {limits.max_frames}", param="num_frames"
        )
    if num_frames / frame_rate > limits.max_seconds:
        raise ApiError(
            400,
            f"duration {num_frames / frame_rate:g} s: over this server's limit of {limits.max_seconds:g} s",
            param="seconds",
        )
    return frame_rate, num_frames


def _seed(value: Any) -> int:
    seed = _int(value, "seed") if value not in (None, "") else secrets.randbelow(2**31)
    if not 0 <= seed < 2**63:
        raise ApiError(400, f"seed {seed}: accepted 0..2**63-1", param="seed")
    return seed


def _image_placement(fields: dict[str, Any], num_frames: int) -> dict[str, Any]:
    """Where and how strongly the uploaded image conditions the video (its path is set once it is saved)."""
    frame_idx = _int(fields.get("image_frame_idx") or 0, "image_frame_idx")
    if not 0 <= frame_idx < num_frames:
        raise ApiError(400, f"image_frame_idx {frame_idx}: accepted 0..{num_frames - 1}", param="image_frame_idx")
    strength = _float(fields.get("image_strength") or 1.0, "image_strength")
    if not 0 <= strength <= 1:
        raise ApiError(400, f"image_strength {strength:g}: accepted [0, 1]", param="image_strength")
    return {"path": None, "frame_idx": frame_idx, "strength": strength}


def _loras(value: Any, limits: Limits) -> list[dict[str, Any]]:
    if value in (None, "", {}):
        return [{"path": path, "strength": 1.0, "name": name} for name, path in limits.loras.items()]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ApiError(400, f"loras {value!r}: expected a JSON object name -> strength", param="loras") from None
    if not isinstance(value, dict):
        raise ApiError(400, f"loras {value!r}: expected an object name -> strength", param="loras")
    unknown = sorted(set(value) - set(limits.loras))
    if unknown:
        loaded = ", ".join(sorted(limits.loras)) or "none"
        raise ApiError(400, f"loras: {unknown[0]!r} is not loaded on this server (loaded: {loaded})", param="loras")
    return [
        {"path": path, "strength": _float(value.get(name, 1.0), f"loras.{name}"), "name": name}
        for name, path in limits.loras.items()
    ]


def _check_image(data: bytes) -> bytes:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ApiError(400, f"input_reference: not a readable image ({e})", param="input_reference") from None
    return data


def image_suffix(data: bytes) -> str:
    """The file suffix of the image's own format (readers that choose by the name then read it right)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return "." + (image.format or "png").lower().replace("jpeg", "jpg")


def save_image(data: bytes, folder: Path, name: str) -> Path:
    """Write the upload atomically (a partial file never looks complete), named with its format's suffix."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = image_suffix(data)
    path = folder / f"{name}{suffix}"
    partial = folder / f".{name}{suffix}.partial"
    partial.write_bytes(data)
    partial.replace(path)
    return path
