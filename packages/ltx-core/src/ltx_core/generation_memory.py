"""The memory of a whole generation, phase by phase, predicted before any weight is loaded.

A run holds one large model at a time: each phase loads what it needs and frees it before the next
(ltx_pipelines' stage blocks). The phases and what is resident in each:

    prompt enhancer   a Gemma generating the rewritten prompt: weights + the KV cache of prompt + new tokens
    text encoder      Gemma over the prompts: weights + every hidden state (the feature extractor mixes all)
                      + one layer's working set
    text embeddings   (Gemma freed) the checkpoint's text projection and connectors over those hidden states
    image encoder     the video VAE encoder (two-stage runs load it for the latent statistics)
    stage 1, stage 2  the transformer as loaded (full, fp8, streamed) + one call's activations
    upsampler         between the stages the transformer stays loaded; + the latent upsampler and its maps
    audio decode      the audio decoder and the float32 vocoder over the whole track
    video decode      the video decoder over one tile (+ on the host the decoded frames, `memory_estimate`)

The device peak is the largest phase. Text-encoder modes (`TEXT_ENCODER_MODES`): `full` (the run's dtype,
or the stored format of a quantized file), `fp8` (the decoder layers' Linear weights stored float8),
`stream-ram` / `stream-disk` (the non-layer weights and `STREAMED_LAYERS` layers on the device, the layers
in host RAM or read from the file). Transformer modes (`TRANSFORMER_MODES`): `full`, `fp8` (fp8-cast),
`stream-ram` (`--offload cpu`), `stream-disk` (`--offload disk`). What a streamed mode keeps in host RAM is
counted apart (`Phase.host`): on a CUDA run it is checked against the host's RAM; where the models run in
host RAM (CPU, MPS) everything is one budget and streaming from RAM saves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.memory_estimate import (
    DECODED_BYTES_PER_PIXEL,
    ENCODER_BYTES_PER_PIXEL,
    LATENT_COPIES,
    TransformerSize,
    WorkloadShape,
    estimate_from_size,
    vae_decode_bytes,
)
from ltx_core.runtime import RuntimeOptions
from ltx_core.runtime_choices import TEXT_ENCODER_MODES

if TYPE_CHECKING:
    from ltx_core.loader.file_headers import FileHeaders

TRANSFORMER_MODES = ("full", "fp8", "stream-ram", "stream-disk")
TRANSFORMER_MODE_OPTIONS: dict[str, RuntimeOptions] = {
    "full": RuntimeOptions(),
    "fp8": RuntimeOptions(quantization="fp8-cast"),
    "stream-ram": RuntimeOptions(offload="cpu"),
    "stream-disk": RuntimeOptions(offload="disk"),
}
STREAMED_LAYERS = 2  # Gemma layers on the device while streaming (as the transformer's device slots)
HOST_SLOTS = 2  # layers the disk source holds in host RAM

# Bytes per stored weight value of the text encoder's formats. GGUF sizes are the ggml block sizes
# (Q8_0: 34 bytes per 32 values; Q4_K: 144 per 256; Q5_K: 176 per 256; Q6_K: 210 per 256). The "_M"
# mixes keep some tensors (attention V, FFN down) in Q6_K: counted as a third of the Linear weights,
# a little more than llama.cpp's mix puts there, so the estimate errs high.
_Q6_K = 210 / 256
WEIGHT_FORMAT_BYTES: dict[str, float] = {
    "fp8": 1.0,
    "8bit": 1.0,  # LLM.int8(): int8 weights (+ one scale per row, negligible)
    "Q8_0": 34 / 32,
    "Q6_K": _Q6_K,
    "Q5_K_M": (2 * 176 / 256 + _Q6_K) / 3,
    "Q4_K_M": (2 * 144 / 256 + _Q6_K) / 3,
}

# Enhancement: the rewritten prompt is at most this many new tokens after a prompt of about this many
# (system prompt, user prompt and an image's soft tokens).
ENHANCER_NEW_TOKENS = 600
ENHANCER_PROMPT_TOKENS = 1024
# The vocoder's live maps, in maps of its largest stage (`vocoder_values_per_sample`): its AMP resblocks run
# three kernel sizes side by side, each with anti-aliased (2x upsampled) activations. Calibrated on CPU runs
# of the demo vocoder: 21.6 MB more RSS per second of 48 kHz audio, with 4 values per sample in its largest
# map (`benchmarks/estimate_vs_rss.py`).
AUDIO_LIVE_MAPS = 28
WAVEFORM_BYTES_PER_SAMPLE = 8  # the stereo float32 waveform, kept until the file is written
UPSAMPLER_LIVE_MAPS = 4  # input, two res-block maps, output of the widest (mid-channel, upsampled) stage
CONNECTOR_VALUES_PER_TOKEN_WIDTH = 16  # as the transformer blocks' (`ACTIVATION_VALUES_PER_TOKEN_WIDTH`)
_GIB = 2**30


def _bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class TextEncoderSize:
    """A Gemma text encoder as its loading modes treat it: the Linear weights of one decoder layer (what fp8
    narrows and streaming moves), the rest of a layer, the weights resident in every mode (embeddings, vision
    tower, projectors, final norm), and the sizes its activations grow with."""

    layer_linear: int
    layer_other: int
    num_layers: int
    embedding: int
    other: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    head_dim: int
    num_kv_heads: int
    weight_format: str | None = None
    """How a file stores its Linear and embedding weights when not in the run's dtype: a key of
    `WEIGHT_FORMAT_BYTES` (a GGUF file's type, an 8-bit load); None: the run's dtype."""

    @property
    def params(self) -> int:
        return self.num_layers * (self.layer_linear + self.layer_other) + self.embedding + self.other

    @property
    def num_hidden_states(self) -> int:
        return self.num_layers + 1

    @classmethod
    def from_text_config(cls, text: Mapping[str, Any], vision_params: int = 0) -> TextEncoderSize:
        """From a Gemma text config (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
        num_key_value_heads, head_dim, vocab_size): the gated MLP (gate, up, down), q/k/v/o without biases,
        four layer norms and the q/k norms of Gemma 3; `vision_params` the vision tower and projector."""
        hidden, inter = int(text["hidden_size"]), int(text["intermediate_size"])
        heads, kv, head_dim = int(text["num_attention_heads"]), int(text["num_key_value_heads"]), int(text["head_dim"])
        attention = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2
        return cls(
            layer_linear=attention + 3 * hidden * inter,
            layer_other=4 * hidden + 2 * head_dim,
            num_layers=int(text["num_hidden_layers"]),
            embedding=int(text["vocab_size"]) * hidden,
            other=hidden + vision_params,
            hidden_size=hidden,
            intermediate_size=inter,
            num_heads=heads,
            head_dim=head_dim,
            num_kv_heads=kv,
        )

    def weight_bytes(self, mode: str, dtype: torch.dtype) -> tuple[int, int]:
        """(bytes resident on the device in every mode, bytes of one layer) in `mode`."""
        if mode not in TEXT_ENCODER_MODES:
            raise ValueError(f"text encoder mode {mode!r} is unknown; accepted: {', '.join(TEXT_ENCODER_MODES)}")
        size = _bytes(dtype)
        stored = WEIGHT_FORMAT_BYTES[self.weight_format] if self.weight_format else float(size)
        linear = 1.0 if mode == "fp8" and not self.weight_format else stored
        # A quantized file quantizes its token embedding too (GGUF); fp8 and bf16 keep it in the dtype.
        embedding = stored if self.weight_format else float(size)
        layer = int(self.layer_linear * linear) + self.layer_other * size
        return int(self.embedding * embedding) + self.other * size, layer

    def resident_bytes(self, mode: str, dtype: torch.dtype) -> tuple[int, int]:
        """(device bytes, host bytes) of the weights in `mode` (host: what streaming keeps in RAM)."""
        resident, layer = self.weight_bytes(mode, dtype)
        if mode == "stream-ram":
            return resident + STREAMED_LAYERS * layer, self.num_layers * layer
        if mode == "stream-disk":
            return resident + STREAMED_LAYERS * layer, HOST_SLOTS * layer
        return resident + self.num_layers * layer, 0

    def encode_activations(self, prompts: int, tokens: int, dtype: torch.dtype) -> int:
        """Every hidden state kept (embedding output + each layer's), one layer's working set (q/k/v/o, the
        gated MLP) and the attention scores of an eager layer (float32)."""
        size = _bytes(dtype)
        states = self.num_hidden_states * prompts * tokens * self.hidden_size * size
        attention_width = (2 * self.num_heads + 2 * self.num_kv_heads) * self.head_dim
        layer = prompts * tokens * (4 * self.hidden_size + 3 * self.intermediate_size + attention_width) * size
        scores = prompts * self.num_heads * tokens * tokens * 4
        return states + layer + scores

    def generate_activations(self, dtype: torch.dtype) -> int:
        """Enhancement: the KV cache of the prompt and the new tokens, and the prompt's pass through one layer."""
        size = _bytes(dtype)
        tokens = ENHANCER_PROMPT_TOKENS + ENHANCER_NEW_TOKENS
        cache = self.num_layers * tokens * 2 * self.num_kv_heads * self.head_dim * size
        return cache + self.encode_activations(1, ENHANCER_PROMPT_TOKENS, dtype) // 2


@dataclass(frozen=True)
class GenerationSizes:
    """Parameter counts of a run's models (the transformer's split as `TransformerSize`)."""

    transformer: TransformerSize
    text_encoder: TextEncoderSize | None
    """None: the run encodes no prompt (precomputed contexts)."""
    text_embeddings: int
    text_embeddings_dims: tuple[int, int]
    """Widths of the video and audio contexts the connectors produce (audio 0: none)."""
    video_encoder: int
    video_decoder: int
    audio_decoder: int
    vocoder: int
    upsampler: int = 0
    upsampler_mid_channels: int = 0
    decoder_values_per_pixel: float = 8.0
    vocoder_values_per_sample: float = 32.0  # the released vocoder + bandwidth extension's
    prompt_enhancer: TextEncoderSize | None = None
    """A separate enhancer Gemma; None: the text encoder enhances."""


@dataclass(frozen=True)
class GenerationWorkload:
    """What a run processes: the transformer workload of its last stage (`memory_estimate.WorkloadShape`),
    whether it has a half-size stage 1 and an upsampler between the stages, how many prompts Gemma encodes in
    one batch (2 with a negative prompt) and their padded length, and whether the prompt is enhanced."""

    shape: WorkloadShape
    two_stage: bool = False
    prompts: int = 1
    prompt_tokens: int = 1024
    enhance: bool = False
    loads_video_encoder: bool = False


@dataclass(frozen=True)
class Phase:
    name: str
    weights: int
    activations: int
    host: int = 0
    """Host RAM the phase holds beside the device: streamed weights, and (decode) the decoded output."""

    @property
    def device(self) -> int:
        return self.weights + self.activations

    def describe(self) -> str:
        host = f", host {self.host / _GIB:.1f}" if self.host else ""
        return f"{self.name} {self.device / _GIB:.1f} GiB (weights {self.weights / _GIB:.1f}{host})"


@dataclass(frozen=True)
class GenerationEstimate:
    phases: tuple[Phase, ...]
    transformer_mode: str
    text_encoder_mode: str

    @property
    def peak_phase(self) -> Phase:
        return max(self.phases, key=lambda p: p.device)

    @property
    def peak(self) -> int:
        """The device peak: the largest phase (streamed weights and the decoded output held on the host)."""
        return self.peak_phase.device

    @property
    def host_peak(self) -> int:
        """The peak where the models run in host RAM: device and host are one memory. The vocoder's buffers are
        many small allocations that the C allocator keeps in its heap once freed: measured on CPU runs, the
        process's memory stays that much higher through the video decode, so they are counted there too."""
        retained = peak = 0
        for p in self.phases:
            peak = max(peak, p.device + p.host + retained)
            if p.name == "audio decode":
                retained = p.activations
        return peak

    @property
    def host_ram(self) -> int:
        """What a CUDA run holds in host RAM at most (streamed weights, the decoded output)."""
        return max(p.host for p in self.phases)

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def describe(self, *, host: bool = False) -> str:
        peak = self.host_peak if host else self.peak
        phases = "; ".join(p.describe() for p in self.phases)
        written = next((p for p in self.phases if p.name == "video write"), None)
        output = f"; decoded output on the host {written.host / _GIB:.1f} GiB" if written else ""
        return f"{peak / _GIB:.1f} GiB peak in {self.peak_phase.name} ({phases}{output})"


def _text_phases(sizes: GenerationSizes, work: GenerationWorkload, mode: str, dtype: torch.dtype) -> list[Phase]:
    te = sizes.text_encoder
    phases: list[Phase] = []
    if te is None:
        return phases
    if work.enhance:
        enhancer = sizes.prompt_enhancer or te
        device, host = enhancer.resident_bytes(mode, dtype)
        phases.append(Phase("prompt enhancer", device, enhancer.generate_activations(dtype), host))
    device, host = te.resident_bytes(mode, dtype)
    phases.append(Phase("text encoder", device, te.encode_activations(work.prompts, work.prompt_tokens, dtype), host))
    # The hidden states stay while the connectors run: their normalized, flattened copy, the projected
    # contexts and the connectors' working set.
    size = _bytes(dtype)
    tokens = work.prompts * work.prompt_tokens
    states = te.num_hidden_states * tokens * te.hidden_size * size
    video_dim, audio_dim = sizes.text_embeddings_dims
    connectors = CONNECTOR_VALUES_PER_TOKEN_WIDTH * tokens * max(video_dim, audio_dim) * size
    contexts = 2 * tokens * (video_dim + audio_dim) * size
    phases.append(Phase("text embeddings", sizes.text_embeddings * size, 2 * states + contexts + connectors))
    return phases


def estimate_generation(
    sizes: GenerationSizes,
    work: GenerationWorkload,
    *,
    transformer_mode: str = "full",
    text_encoder_mode: str = "full",
    dtype: torch.dtype = torch.bfloat16,
    transformer_options: RuntimeOptions | None = None,
) -> GenerationEstimate:
    """Every phase of a run with these modes (see the module docstring); `transformer_options` (the flags a user
    gave) replace those of `transformer_mode`."""
    if transformer_mode not in TRANSFORMER_MODES:
        raise ValueError(f"transformer mode {transformer_mode!r} is unknown; accepted: {', '.join(TRANSFORMER_MODES)}")
    size = _bytes(dtype)
    phases = _text_phases(sizes, work, text_encoder_mode, dtype)
    if work.loads_video_encoder:
        phases.append(Phase("image encoder", sizes.video_encoder * size, 0))

    options = transformer_options or TRANSFORMER_MODE_OPTIONS[transformer_mode]
    t = sizes.transformer
    _non_block, block = t.weight_bytes(options, dtype)
    streamed_host = {"cpu": t.num_blocks * block, "disk": options.host_slots * block}
    transformer_host = streamed_host.get(options.offload, 0)
    shape = work.shape
    stages = [("stage 1", replace(shape, video_tokens=shape.video_tokens // 4))] if work.two_stage else []
    stages.append(("stage 2" if work.two_stage else "denoising", shape))
    for name, stage in stages:
        e = estimate_from_size(t, options, stage, dtype)
        phases.append(Phase(name, e.weights, e.activations, transformer_host))
    if work.two_stage and sizes.upsampler:
        # The transformer stays loaded; the upsampler's widest maps are mid channels at the upsampled size.
        maps = UPSAMPLER_LIVE_MAPS * shape.video_tokens * sizes.upsampler_mid_channels * size
        phases.insert(-1, Phase("upsampler", phases[-1].weights + sizes.upsampler * size, maps, transformer_host))
    # The vocoder runs in float32 over the whole track.
    waveform = WAVEFORM_BYTES_PER_SAMPLE * shape.audio_samples
    if shape.audio_samples:
        vocoder = AUDIO_LIVE_MAPS * sizes.vocoder_values_per_sample * 4 * shape.audio_samples
        phases.append(Phase("audio decode", sizes.audio_decoder * size + sizes.vocoder * 4, int(vocoder)))
    if shape.vae_tile_frames:
        # Decoding a tile: its maps, while the frames decoded before it wait on the host (float32 RGB; at most
        # the clip less one tile). Writing (the decoder freed): every frame and the encoder's buffers of a chunk.
        tile = replace(shape, vae_values_per_pixel=sizes.decoder_values_per_pixel)
        frame = shape.output_height * shape.output_width
        before = max(0, shape.output_frames - shape.vae_tile_frames) * frame
        chunk = min(shape.vae_tile_frames, shape.output_frames) * frame
        kept = waveform + LATENT_COPIES * 4 * shape.latent_values
        decode = Phase(
            "video decode", sizes.video_decoder * size, vae_decode_bytes(tile, dtype),
            kept + DECODED_BYTES_PER_PIXEL * before,
        )  # fmt: skip
        written = kept + DECODED_BYTES_PER_PIXEL * shape.output_frames * frame + ENCODER_BYTES_PER_PIXEL * chunk
        phases += [decode, Phase("video write", 0, 0, written)]
    return GenerationEstimate(tuple(phases), transformer_mode, text_encoder_mode)


# ---- sizes from files and configs -----------------------------------------------------------------------

_LAYER_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_GGUF_FORMATS = {"Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K": "Q5_K_M", "Q4_K": "Q4_K_M"}


def _is_language_key(key: str) -> bool:
    return not any(part in key for part in ("vision", "audio", "multi_modal", "projector", "projection"))


def text_encoder_size_of(path: str | Path, headers: FileHeaders | None = None) -> TextEncoderSize:
    """The size of the Gemma at `path` (a Hugging Face folder or a packed file, safetensors or GGUF), counted
    from its files' tensor headers (no weight is read) with the activation sizes from its text config.
    `headers`: the run's store (a header it holds is not read again)."""
    from ltx_core.loader.gguf_file import is_gguf
    from ltx_core.loader.safetensors_header import read_safetensors_header
    from ltx_core.text_encoders.gemma.folder import locate_gemma_folder
    from ltx_core.text_encoders.gemma.packed import read_packed_gemma

    path = Path(path).expanduser()
    if is_gguf(path):
        return _gguf_text_encoder_size(path)
    if path.is_dir():
        folder = locate_gemma_folder(path)
        files, text = folder.weight_files, dict(folder.text_config)
        defaults_of = folder._text_size
    else:
        packed = read_packed_gemma(path, headers)
        files, text = (packed.path,), dict(packed.text_config)
        defaults_of = None
    for name in ("intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers"):
        if text.get(name) is None and defaults_of is not None:
            text[name] = defaults_of(name)
    tensors = (
        (key, info.numel, info.dtype)
        for file in files
        for key, info in (read_safetensors_header(file) if headers is None else headers.header(file)).tensors.items()
        if info.dtype != "U8"  # packed tokenizer and asset bytes
    )
    return _size_from_tensors(tensors, text)


# llama.cpp's Gemma 3 names (`gguf_gemma`): a decoder layer's linear weights and the token embedding, named as
# the Hugging Face keys `_size_from_tensors` sorts.
_GGUF_LINEAR = re.compile(r"^blk\.(\d+)\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$")
_GGUF_LAYER = re.compile(r"^blk\.(\d+)\.")


def _gguf_text_encoder_size(path: Path) -> TextEncoderSize:
    """A GGUF Gemma 3's size: its header's tensors (stored types kept: Q8_0, Q6_K, ...) and its text config."""
    from ltx_core.loader.gguf_file import read_gguf_header
    from ltx_core.text_encoders.gemma.gguf_gemma import gguf_gemma_text_config

    def hf_key(key: str) -> str:
        if (m := _GGUF_LINEAR.match(key)) is not None:
            return f"model.layers.{m.group(1)}.{m.group(2)}.proj.weight"
        if (m := _GGUF_LAYER.match(key)) is not None:
            return f"model.layers.{m.group(1)}.{key[m.end():]}"
        return "model.embed_tokens.weight" if key == "token_embd.weight" else key

    tensors = ((hf_key(key), info.numel, info.dtype) for key, info in read_gguf_header(path).tensors.items())
    return _size_from_tensors(tensors, gguf_gemma_text_config(path))


def text_encoder_size_from_config(hf_config: Mapping[str, Any]) -> TextEncoderSize:
    """The size of a Gemma from its Hugging Face config alone (e.g. a released model's config.json), counted on
    a meta-device build of the multimodal class the pipelines load."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = dict(hf_config)
    hf = AutoConfig.for_model(config.pop("model_type"), **config)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(hf)
    tensors = ((k, t.numel(), "BF16") for k, t in model.state_dict().items() if not k.startswith("lm_head."))
    return _size_from_tensors(tensors, hf.text_config.to_dict())


def _size_from_tensors(tensors: Iterable[tuple[str, int, str]], text: Mapping[str, Any]) -> TextEncoderSize:
    layers = int(text["num_hidden_layers"])
    linear = other_layer = embedding = other = 0
    formats: dict[str, int] = {}
    for key, n, dtype in tensors:
        if _is_language_key(key) and _LAYER_KEY.search(key):
            if key.endswith("proj.weight"):
                linear += n
                formats[dtype] = formats.get(dtype, 0) + n
            else:
                other_layer += n
        elif _is_language_key(key) and "embed_tokens" in key:
            embedding += n
        else:
            other += n
    stored = max(formats, key=formats.__getitem__) if formats else None
    return TextEncoderSize(
        layer_linear=linear // layers,
        layer_other=other_layer // layers,
        num_layers=layers,
        embedding=embedding,
        other=other,
        hidden_size=int(text["hidden_size"]),
        intermediate_size=int(text["intermediate_size"]),
        num_heads=int(text["num_attention_heads"]),
        head_dim=int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]),
        num_kv_heads=int(text["num_key_value_heads"]),
        weight_format=_GGUF_FORMATS.get(stored or ""),
    )


def _params(module: torch.nn.Module) -> int:
    return sum(t.numel() for t in module.state_dict().values())


def generation_sizes(
    checkpoint_config: Mapping[str, Any],
    text_encoder: TextEncoderSize | None,
    upsampler_config: Mapping[str, Any] | None = None,
    prompt_enhancer: TextEncoderSize | None = None,
) -> GenerationSizes:
    """Every model's size, from meta-device builds of the checkpoint's config sections (no weight is read)."""
    from ltx_core.memory_estimate import decoder_values_per_pixel, transformer_size, vocoder_values_per_sample
    from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
    from ltx_core.model.upsampler import LATENT_UPSAMPLER
    from ltx_core.model.video_vae import VIDEO_ENCODER, video_decoder_spec
    from ltx_core.text_encoders.gemma.embeddings_processor import text_embeddings_spec

    config = dict(checkpoint_config)
    with torch.device("meta"):
        embeddings = None
        if text_encoder is not None:
            spec = text_embeddings_spec(text_encoder.hidden_size, text_encoder.num_hidden_states)
            embeddings = spec.configurator(config)
        counts = {
            "video_encoder": _params(VIDEO_ENCODER.configurator(config)) if "vae" in config else 0,
            "video_decoder": _params(video_decoder_spec(config).configurator(config)) if "vae" in config else 0,
            "audio_decoder": _params(AUDIO_DECODER.configurator(config)) if "audio_vae" in config else 0,
            "vocoder": _params(VOCODER.configurator(config)) if "vocoder" in config else 0,
        }
        upsampler = None if upsampler_config is None else LATENT_UPSAMPLER.configurator(dict(upsampler_config))
    transformer = config.get("transformer") or {}
    # The connectors run at the transformer's context widths (the projection comes first in LTX-2.3).
    context_dims = (
        int(transformer.get("cross_attention_dim", 0)),
        int(transformer.get("audio_cross_attention_dim", 0)),
    )
    return GenerationSizes(
        transformer=transformer_size(config),
        text_encoder=text_encoder,
        text_embeddings=0 if embeddings is None else _params(embeddings),
        text_embeddings_dims=context_dims,
        **counts,
        upsampler=0 if upsampler is None else _params(upsampler),
        upsampler_mid_channels=0 if upsampler is None else upsampler.config.mid_channels,
        decoder_values_per_pixel=decoder_values_per_pixel(config["vae"]) if "vae" in config else 0.0,
        vocoder_values_per_sample=vocoder_values_per_sample(config["vocoder"]) if "vocoder" in config else 0.0,
        prompt_enhancer=prompt_enhancer,
    )


AUDIO_LATENTS_PER_SECOND = 25
AUDIO_OUTPUT_RATE = 48_000  # samples a second of the released (bandwidth-extended) vocoders
LATENT_CHANNELS = 128


def video_workload(
    height: int | None,
    width: int | None,
    frames: int,
    frame_rate: float,
    *,
    tiling: Any = None,
    batch: int = 1,
    seconds: float | None = None,
) -> WorkloadShape:
    """The final stage's workload of a clip of `frames` at `height` x `width` (None: audio only): its tokens,
    the decode tile of `tiling` (None: the automatic layout) and the decoded output."""
    from ltx_core.model.video_vae.tiling_config import TilingConfig
    from ltx_core.types import DEFAULT_SCALE_FACTORS as scale

    seconds = frames / frame_rate if seconds is None else seconds
    audio_tokens = int(seconds * AUDIO_LATENTS_PER_SECOND) + 1
    video_tokens = 0
    tile = (0, 0, 0)
    if height is not None and width is not None:
        layout = tiling or TilingConfig.for_output(height, width, scale)
        video_tokens = ((frames - 1) // scale.time + 1) * (height // scale.height) * (width // scale.width)
        tile = (
            min(frames, layout.frames.tile_size or frames),
            min(height, layout.height.tile_size or height),
            min(width, layout.width.tile_size or width),
        )
    picture = height is not None and width is not None
    return WorkloadShape(
        video_tokens=video_tokens,
        audio_tokens=audio_tokens,
        batch=batch,
        vae_tile_frames=tile[0],
        vae_tile_height=tile[1],
        vae_tile_width=tile[2],
        output_frames=frames if picture else 0,
        output_height=height or 0,
        output_width=width or 0,
        audio_samples=round(seconds * AUDIO_OUTPUT_RATE),
        latent_values=LATENT_CHANNELS * (video_tokens + audio_tokens),
    )


def sizes_of_files(
    checkpoint_config: Mapping[str, Any],
    gemma: str | Path | None,
    upsampler: str | Path | None = None,
    *,
    gemma_8bit: bool = False,
    headers: FileHeaders | None = None,
) -> GenerationSizes:
    """`generation_sizes` of a run's files: the Gemma folder or packed file (None: no prompt encoding), the
    latent upsampler file (its `config` metadata), all read from headers only. `gemma_8bit`: Gemma loaded as
    LLM.int8(). `headers`: the run's store (the headers its checks read already are not read again)."""
    from ltx_core.loader.file_headers import FileHeaders

    headers = FileHeaders() if headers is None else headers
    text = None if gemma is None else text_encoder_size_of(gemma, headers)
    if text is not None and gemma_8bit:
        text = replace(text, weight_format="8bit")
    upsampler_config = None
    # A diffusers folder's latent_upsampler/ keeps its config in config.json: counted at the default sizes.
    if upsampler is not None and not Path(upsampler).is_dir():
        upsampler_config = headers.metadata(upsampler).get("config") or {}
    return generation_sizes(checkpoint_config, text, upsampler_config)
