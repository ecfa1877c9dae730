"""SimpleDenoiser / GuidedDenoiser against a fake model that records its batch."""

from __future__ import annotations

import pytest
import torch

from ltx_core.components.denoisers import GuidedDenoiser, SimpleDenoiser, call_in_chunks
from ltx_core.components.guiders import GuiderSchedule, MultiModalGuiderParams
from ltx_core.guidance.perturbations import PerturbationType
from ltx_core.types import LatentState


def _state(batch: int, tokens: int, width: int, seed: int, axes: int = 3) -> LatentState:
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(batch, tokens, width, generator=g)
    mask = torch.ones(batch, tokens, 1)
    mask[:, :2] = 0.25
    return LatentState(latent, mask, torch.rand(batch, axes, tokens, 2, generator=g), torch.zeros_like(latent))


def _ctx(batch: int, value: float, width: int) -> torch.Tensor:
    return torch.full((batch, 5, width), value)


def _expected(latent, cond_c, neg_c, skip_self, skip_cross, p: MultiModalGuiderParams):
    """The guidance formula written out on the fake model's per-pass outputs."""
    base = latent * 0.5
    cond = base + cond_c
    uncond = base + neg_c
    perturbed = base + cond_c + skip_self
    isolated = base + cond_c + skip_cross
    pred = (
        cond
        + (p.cfg_scale - 1) * (cond - uncond)
        + p.stg_scale * (cond - perturbed)
        + (p.modality_scale - 1) * (cond - isolated)
    )
    if p.rescale_scale:
        pred = pred * (p.rescale_scale * cond.std() / pred.std() + 1 - p.rescale_scale)
    return pred


def test_simple_denoiser_builds_one_conditional_call(fake_model, modality_type):
    video, audio = _state(1, 6, 8, 0), _state(1, 4, 8, 1, axes=1)
    denoiser = SimpleDenoiser(fake_model, _ctx(1, 1.0, 3), _ctx(1, 2.0, 2), modality_type=modality_type)
    v, a = denoiser(video, audio, torch.tensor(0.5), 0)
    assert len(fake_model.calls) == 1
    vm, _, ptb = fake_model.calls[0]
    assert ptb is None
    torch.testing.assert_close(vm.timesteps, video.denoise_mask * 0.5)
    torch.testing.assert_close(vm.sigma, torch.tensor([0.5]))
    torch.testing.assert_close(v, video.latent * 0.5 + 1.0)
    torch.testing.assert_close(a, audio.latent * 0.5 + 2.0)


def test_frozen_state_reports_sigma_zero(fake_model, modality_type):
    audio = _state(1, 4, 8, 1, axes=1)
    frozen = LatentState(
        audio.latent, torch.zeros_like(audio.denoise_mask), audio.positions, audio.clean_latent, frozen=True
    )
    SimpleDenoiser(fake_model, None, _ctx(1, 2.0, 2), modality_type=modality_type)(None, frozen, 0.7, 0)
    _, am, _ = fake_model.calls[0]
    assert float(am.sigma.abs().max()) == 0.0
    assert float(am.timesteps.abs().max()) == 0.0


@pytest.mark.parametrize("batch", [1, 2])
def test_guided_denoiser_batches_all_passes(fake_model, modality_type, batch):
    video, audio = _state(batch, 6, 8, 0), _state(batch, 4, 8, 1, axes=1)
    vp = MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(0,), rescale_scale=0.7, modality_scale=3.0)
    ap = MultiModalGuiderParams(cfg_scale=7.0, stg_scale=1.0, stg_blocks=(0,), rescale_scale=0.7, modality_scale=3.0)
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(batch, 1.0, 3),
        _ctx(batch, 2.0, 2),
        negative_video_context=_ctx(batch, -1.0, 3),
        negative_audio_context=_ctx(batch, -2.0, 2),
        video_guidance=vp,
        audio_guidance=ap,
        modality_type=modality_type,
    )
    v, a = denoiser(video, audio, torch.tensor(0.8), 0)

    assert len(fake_model.calls) == 1
    vm, am, ptb = fake_model.calls[0]
    assert vm.latent.shape[0] == 4 * batch and am.latent.shape[0] == 4 * batch
    # Pass-major order: cond, uncond, perturbed, isolated; each pass holds the whole state batch.
    torch.testing.assert_close(vm.latent, video.latent.repeat(4, 1, 1))
    means = vm.context.mean(dim=(1, 2))
    torch.testing.assert_close(means, torch.tensor([1.0, -1.0, 1.0, 1.0]).repeat_interleave(batch))
    torch.testing.assert_close(vm.sigma, torch.full((4 * batch,), 0.8))
    kinds = [[(t, item.skips(t, 0)) for t in PerturbationType if item.skips(t, 0)] for item in ptb.items]
    assert kinds[:batch] == [[]] * batch and kinds[batch : 2 * batch] == [[]] * batch
    assert all(
        {t for t, _ in k} == {PerturbationType.SKIP_VIDEO_SELF_ATTN, PerturbationType.SKIP_AUDIO_SELF_ATTN}
        for k in kinds[2 * batch : 3 * batch]
    )
    assert all(
        {t for t, _ in k} == {PerturbationType.SKIP_A2V_CROSS_ATTN, PerturbationType.SKIP_V2A_CROSS_ATTN}
        for k in kinds[3 * batch :]
    )
    assert not ptb.items[2 * batch].skips(PerturbationType.SKIP_VIDEO_SELF_ATTN, 1)  # only stg_blocks

    torch.testing.assert_close(v, _expected(video.latent, 1.0, -1.0, 10.0, 100.0, vp))
    torch.testing.assert_close(a, _expected(audio.latent, 2.0, -2.0, 20.0, 200.0, ap))


def test_guided_denoiser_runs_only_needed_passes(fake_model, modality_type):
    video = _state(1, 6, 8, 0)
    p = MultiModalGuiderParams(cfg_scale=4.0, modality_scale=3.0)  # modality guidance needs audio: no pass
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        None,
        negative_video_context=_ctx(1, 0.5, 3),
        video_guidance=p,
        modality_type=modality_type,
    )
    v, a = denoiser(video, None, 0.5, 0)
    vm, am, _ = fake_model.calls[0]
    assert am is None and a is None
    assert vm.latent.shape[0] == 2
    torch.testing.assert_close(v, _expected(video.latent, 1.0, 0.5, 0.0, 0.0, p))


def test_guided_denoiser_without_guidance_is_one_conditional_pass(fake_model, modality_type):
    video = _state(1, 6, 8, 0)
    v, _ = GuidedDenoiser(fake_model, _ctx(1, 1.0, 3), None, modality_type=modality_type)(video, None, 0.5, 0)
    assert fake_model.calls[0][0].latent.shape[0] == 1
    torch.testing.assert_close(v, video.latent * 0.5 + 1.0)


def test_max_batch_size_split_matches_single_call(fake_model, modality_type):
    video, audio = _state(1, 6, 8, 0), _state(1, 4, 8, 1, axes=1)
    params = MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(0,), modality_scale=2.0)
    kwargs = dict(
        negative_video_context=_ctx(1, -1.0, 3),
        negative_audio_context=_ctx(1, -2.0, 2),
        video_guidance=params,
        audio_guidance=params,
        modality_type=modality_type,
    )
    whole = GuidedDenoiser(fake_model, _ctx(1, 1.0, 3), _ctx(1, 2.0, 2), **kwargs)(video, audio, 0.5, 0)
    fake_model.calls.clear()
    split = GuidedDenoiser(fake_model, _ctx(1, 1.0, 3), _ctx(1, 2.0, 2), max_batch_size=3, **kwargs)(
        video, audio, 0.5, 0
    )
    assert [c[0].latent.shape[0] for c in fake_model.calls] == [3, 1]
    assert [c[2].batch_size for c in fake_model.calls] == [3, 1]
    # The second chunk is the isolated pass: its perturbation travelled with it.
    assert fake_model.calls[1][2].items[0].skips(PerturbationType.SKIP_A2V_CROSS_ATTN, 5)
    for w, s in zip(whole, split):
        torch.testing.assert_close(w, s)


def test_call_in_chunks_rejects_bad_size(fake_model, modality_type):
    with pytest.raises(ValueError, match="max_batch_size"):
        GuidedDenoiser(fake_model, None, None, max_batch_size=0)
    video = _state(2, 3, 4, 0)
    m = modality_type(
        latent=video.latent,
        timesteps=video.denoise_mask,
        sigma=torch.ones(2),
        positions=video.positions,
        context=_ctx(2, 1.0, 3),
    )
    out, _ = call_in_chunks(fake_model, m, None, None, 1)
    assert len(fake_model.calls) == 2
    torch.testing.assert_close(out, video.latent * 0.5 + 1.0)


def test_skip_step_reuses_last_prediction(fake_model, modality_type):
    video = _state(1, 6, 8, 0)
    p = MultiModalGuiderParams(cfg_scale=3.0, skip_step=1)
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        None,
        negative_video_context=_ctx(1, -1.0, 3),
        video_guidance=p,
        modality_type=modality_type,
    )
    first, _ = denoiser(video, None, 0.9, 0)
    moved = LatentState(video.latent + 1, video.denoise_mask, video.positions, video.clean_latent)
    second, _ = denoiser(moved, None, 0.8, 1)  # 1 % 2 != 0: skipped, no model call
    assert len(fake_model.calls) == 1
    assert second is first
    third, _ = denoiser(moved, None, 0.7, 2)
    assert len(fake_model.calls) == 2
    torch.testing.assert_close(third, _expected(moved.latent, 1.0, -1.0, 0.0, 0.0, p))


def test_skipped_modality_is_disabled_while_other_runs(fake_model, modality_type):
    video, audio = _state(1, 6, 8, 0), _state(1, 4, 8, 1, axes=1)
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        _ctx(1, 2.0, 2),
        video_guidance=MultiModalGuiderParams(skip_step=1),
        modality_type=modality_type,
    )
    v0, _ = denoiser(video, audio, 0.9, 0)
    v1, a1 = denoiser(video, audio, 0.8, 1)
    vm, am, _ = fake_model.calls[1]
    assert vm.enabled is False and am.enabled is True
    assert v1 is v0
    torch.testing.assert_close(a1, audio.latent * 0.5 + 2.0)


def test_sigma_schedule_of_params(fake_model, modality_type):
    video = _state(1, 6, 8, 0)
    schedule = GuiderSchedule.from_mapping({1.0: MultiModalGuiderParams(cfg_scale=5.0), 0.5: MultiModalGuiderParams()})
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        None,
        negative_video_context=_ctx(1, 0.0, 3),
        video_guidance=schedule,
        modality_type=modality_type,
    )
    denoiser(video, None, 0.9, 0)
    denoiser(video, None, 0.4, 1)
    assert [c[0].latent.shape[0] for c in fake_model.calls] == [2, 1]


def test_missing_negative_context_is_an_error(fake_model, modality_type):
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        None,
        video_guidance=MultiModalGuiderParams(cfg_scale=3.0),
        modality_type=modality_type,
    )
    with pytest.raises(ValueError, match="negative video text context"):
        denoiser(_state(1, 6, 8, 0), None, 0.5, 0)


def test_stg_without_blocks_is_an_error(fake_model, modality_type):
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        None,
        video_guidance=MultiModalGuiderParams(stg_scale=1.0),
        modality_type=modality_type,
    )
    with pytest.raises(ValueError, match="stg_blocks"):
        denoiser(_state(1, 6, 8, 0), None, 0.5, 0)


def test_context_masks_follow_their_pass(fake_model, modality_type):
    video = _state(1, 6, 8, 0)
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    denoiser = GuidedDenoiser(
        fake_model,
        _ctx(1, 1.0, 3),
        None,
        negative_video_context=_ctx(1, 0.0, 3),
        video_guidance=MultiModalGuiderParams(cfg_scale=2.0),
        context_mask=mask,
        modality_type=modality_type,
    )
    denoiser(video, None, 0.5, 0)
    vm = fake_model.calls[0][0]
    torch.testing.assert_close(vm.context_mask, torch.cat([mask, torch.ones_like(mask)]))
