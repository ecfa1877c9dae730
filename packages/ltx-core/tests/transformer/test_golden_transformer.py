"""Parity with the reference transformer forward (`fx_transformer`), through `build_model`."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend

from ltx_core.guidance.perturbations import (
    BatchedPerturbationConfig,
    Perturbation,
    PerturbationConfig,
    PerturbationType,
)
from ltx_core.loader import build_model
from ltx_core.model.transformer import (
    AUDIO_ONLY_TRANSFORMER,
    AV_TRANSFORMER,
    VIDEO_ONLY_TRANSFORMER,
    Modality,
    X0Model,
    attention_backends,
)
from ltx_core.tune import KERNEL_PATHS, KernelChoices, attach, norm

pytestmark = pytest.mark.golden

# What each case of the fixture schema does (shapes, blocks and flags come from the fixture itself).
_MASKED_CASES = {"mid"}
_PLAIN_CASES = {"full", "video_only", "audio_only"}
_KNOWN_CASES = _MASKED_CASES | _PLAIN_CASES | {"stg", "isolated"}


def _case_perturbations(case: str, params: dict, batch: int) -> BatchedPerturbationConfig | None:
    if case == "stg":
        blocks = tuple(params["stg_blocks"])
        item = PerturbationConfig(
            (
                Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, blocks),
                Perturbation(PerturbationType.SKIP_AUDIO_SELF_ATTN, blocks),
            )
        )
    elif case == "isolated":
        item = PerturbationConfig(
            (Perturbation(PerturbationType.SKIP_A2V_CROSS_ATTN), Perturbation(PerturbationType.SKIP_V2A_CROSS_ATTN))
        )
    else:
        return None
    return BatchedPerturbationConfig((item,) * batch)


def _modality(fx, case: str, stream: str) -> Modality | None:
    if f"{case}.{stream}_sigma" not in fx:
        return None
    return Modality(
        latent=fx[f"{stream}_latent"],
        timesteps=fx[f"{case}.{stream}_timesteps"],
        sigma=fx[f"{case}.{stream}_sigma"],
        positions=fx[f"{stream}_positions"],
        context=fx[f"{stream}_context"],
        context_mask=fx["context_mask"] if case in _MASKED_CASES else None,
    )


@pytest.fixture(scope="module")
def av_model(golden_model_source):
    return build_model(AV_TRANSFORMER, golden_model_source, dtype=torch.float32, device="cpu")


# Every path the kernel choices can force on the CPU: each SDPA kernel, and the mirrored RMS norm.
_FORCED = [("sdpa", path) for path in KERNEL_PATHS["sdpa"]] + [("rms-norm", "mirrored")]


@pytest.mark.parametrize(("kind", "path"), _FORCED, ids=[f"{k}={p}" for k, p in _FORCED])
def test_every_case_matches_reference(golden_fixture, av_model, assert_golden_close, monkeypatch, kind, path):
    """Every case, once per CPU kernel path the kernel choices can force (SDPA flash, math; RMS norm mirrored)."""
    kernels, norms = [], []
    real = attention_backends.sdpa_kernel
    monkeypatch.setattr(attention_backends, "sdpa_kernel", lambda backends: kernels.append(backends) or real(backends))
    real_norm = norm.mirrored_rms_norm
    monkeypatch.setattr(norm, "mirrored_rms_norm", lambda x, *a: norms.append(x.shape) or real_norm(x, *a))
    attach(av_model, KernelChoices.fixed({kind: path}))
    fx = golden_fixture("fx_transformer")
    cases = list(fx.params["cases"])
    assert cases, "fixture lists no cases"
    # A case this test does not know would otherwise run unperturbed and unmasked, and fail obscurely.
    assert set(cases) <= _KNOWN_CASES, f"unknown transformer cases {sorted(set(cases) - _KNOWN_CASES)}"
    assert av_model.num_blocks == fx.params["num_blocks"]
    x0_model = X0Model(av_model)
    for case in cases:
        video, audio = _modality(fx, case, "video"), _modality(fx, case, "audio")
        batch = (video or audio).latent.shape[0]
        perturbations = _case_perturbations(case, fx.params, batch)
        velocities = av_model(video, audio, perturbations)
        denoised = x0_model(video, audio, perturbations)
        for stream, velocity, x0 in zip(("video", "audio"), velocities, denoised):
            if f"{case}.{stream}_velocity" not in fx:
                assert velocity is None, f"{case}: {stream} produced without input"
                continue
            assert_golden_close(velocity, fx[f"{case}.{stream}_velocity"], name=f"{case}.{stream}_velocity")
            assert_golden_close(x0, fx[f"{case}.{stream}_denoised"], name=f"{case}.{stream}_denoised")
    if kind == "sdpa":
        assert kernels, "no attention call went through the chosen SDPA kernel"
        assert all(k[0] == (SDPBackend.MATH if path == "math" else SDPBackend.FLASH_ATTENTION) for k in kernels)
    else:
        assert norms, "no RMS norm went through the mirrored path"


def test_single_stream_variants_match_reference(golden_fixture, golden_model_source, assert_golden_close):
    """The video-only / audio-only models (built without the other stream) reproduce those cases."""
    fx = golden_fixture("fx_transformer")
    for case, spec, stream in (
        ("video_only", VIDEO_ONLY_TRANSFORMER, "video"),
        ("audio_only", AUDIO_ONLY_TRANSFORMER, "audio"),
    ):
        if case not in fx.params["cases"]:
            continue
        model = build_model(spec, golden_model_source, dtype=torch.float32, device="cpu")
        modality = _modality(fx, case, stream)
        velocity = model(modality, None) if stream == "video" else model(None, modality)
        got = velocity[0] if stream == "video" else velocity[1]
        assert_golden_close(got, fx[f"{case}.{stream}_velocity"], name=f"{spec.name} {case}")
