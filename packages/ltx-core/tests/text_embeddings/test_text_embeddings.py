"""Feature extractors, connector and processor on tiny random configs (no golden files)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from ltx_core.text_encoders.gemma.connector import ConnectorConfig, EmbeddingsConnector
from ltx_core.text_encoders.gemma.embeddings_processor import (
    TEXT_EMBEDDINGS,
    EmbeddingsProcessor,
    configure_embeddings_processor,
    text_embeddings_spec,
)
from ltx_core.text_encoders.gemma.feature_extractor import (
    FeatureExtractorV1,
    FeatureExtractorV2,
    range_normalized_features,
)

H, L, S = 8, 3, 8  # Gemma width, hidden states, sequence length

V2_CONFIG: dict[str, Any] = {
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "caption_proj_before_connector": True,
    "caption_proj_input_norm": False,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "connector_num_attention_heads": 2,
    "connector_attention_head_dim": 8,
    "audio_connector_num_attention_heads": 2,
    "audio_connector_attention_head_dim": 4,
    "connector_num_layers": 1,
    "connector_positional_embedding_max_pos": [64],
    "connector_num_learnable_registers": 4,
    "connector_apply_gated_attention": True,
    "frequencies_precision": "float64",
    "rope_type": "split",
    "text_encoder_norm_type": "per_token_rms",
}
V1_CONFIG: dict[str, Any] = {
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "caption_channels": H,
    "connector_num_attention_heads": 2,
    "connector_attention_head_dim": 4,
    "connector_num_layers": 2,
    "connector_positional_embedding_max_pos": [64],
    "connector_num_learnable_registers": 4,
}


def _randomize(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / (p.shape[-1] ** 0.5 if p.ndim > 1 else 2))
    return module.eval()


def _processor(config: dict[str, Any], **kw: Any) -> EmbeddingsProcessor:
    return _randomize(configure_embeddings_processor({"transformer": copy.deepcopy(config)}, H, L, **kw))


def _inputs(seed: int = 0, valid=(5, 8)) -> tuple[list[torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    hidden = [torch.randn(len(valid), S, H, generator=g) * (i + 1) for i in range(L)]
    mask = torch.zeros(len(valid), S, dtype=torch.int64)
    for row, n in enumerate(valid):
        mask[row, S - n :] = 1  # left padding
    return hidden, mask


def test_v1_range_normalisation_against_a_slow_formula():
    hidden, mask = _inputs()
    stacked = torch.stack(hidden, dim=-1)
    got = range_normalized_features(stacked, mask)
    for b in range(stacked.shape[0]):
        rows = mask[b].bool()
        for layer in range(L):
            x = stacked[b, :, :, layer].double()
            v = x[rows]
            want = 8 * (x - v.sum() / (v.numel() + 1e-6)) / (v.max() - v.min() + 1e-6)
            want[~rows] = 0
            assert torch.allclose(got[b].view(S, H, L)[:, :, layer].double(), want, atol=1e-5)


def test_v1_and_v2_are_selected_by_config():
    assert isinstance(_processor(V1_CONFIG).feature_extractor, FeatureExtractorV1)
    assert isinstance(_processor(V2_CONFIG).feature_extractor, FeatureExtractorV2)


def test_v1_feeds_the_same_features_to_both_modalities():
    processor = _processor(V1_CONFIG)
    video, audio = processor.extract_features(*_inputs())
    assert torch.equal(video, audio) and video.shape == (2, S, H)
    contexts = processor(*_inputs())
    assert contexts.video.shape == (2, S, H) and contexts.audio.shape == (2, S, H)


def test_v2_feature_scaling_and_padding():
    processor = _processor(V2_CONFIG)
    hidden, mask = _inputs()
    video, audio = processor.extract_features(hidden, mask)
    assert video.shape == (2, S, 16) and audio.shape == (2, S, 8)
    # padded tokens are zero before the projection, so they equal the projection bias
    fe = processor.feature_extractor
    assert torch.allclose(video[0, 0], fe.video_aggregate_embed.bias)
    # per-token RMS normalisation: scaling one token's hidden states does not change its features
    scaled = [h.clone() for h in hidden]
    for h in scaled:
        h[1, 3] *= 7.0
    assert torch.allclose(processor.extract_features(scaled, mask)[0], video, atol=1e-5)


@pytest.mark.parametrize("config", [V1_CONFIG, V2_CONFIG], ids=["v1", "v2"])
def test_padding_side_does_not_matter(config):
    """Valid tokens are moved first (stably): left- and right-padded inputs give the same contexts."""
    processor = _processor(config)
    hidden, mask = _inputs()
    left = processor(hidden, mask)
    right_hidden = [torch.stack([torch.roll(h[b], -int(S - mask[b].sum()), 0) for b in range(2)]) for h in hidden]
    right_mask = torch.stack([torch.roll(mask[b], -int(S - mask[b].sum()), 0) for b in range(2)])
    right = processor(right_hidden, right_mask)
    assert torch.allclose(left.video, right.video, atol=1e-5) and torch.allclose(left.audio, right.audio, atol=1e-5)
    assert left.mask.dtype == torch.int64 and bool((left.mask == 1).all())


def test_padded_slots_hold_registers_and_pad_values_are_ignored():
    processor = _processor(V2_CONFIG)
    hidden, mask = _inputs()
    base = processor(hidden, mask)
    noisy = [torch.where(mask[:, :, None].bool(), h, torch.full_like(h, 1e3)) for h in hidden]
    assert torch.allclose(processor(noisy, mask).video, base.video, atol=1e-5)
    # The registers reach the output: changing them moves the contexts of the padded row.
    with torch.no_grad():
        processor.video_connector.learnable_registers.add_(1.0)
    moved = processor(hidden, mask).video
    assert not torch.allclose(moved[0], base.video[0])
    assert torch.allclose(moved[1], base.video[1], atol=1e-5)  # row 1 has no padding


def test_connector_without_registers_masks_padding():
    cfg = ConnectorConfig(heads=2, head_dim=4, num_layers=1, max_pos=(32,), num_registers=0)
    connector = _randomize(EmbeddingsConnector(cfg))
    assert not hasattr(connector, "learnable_registers")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 6, 8, generator=g)
    valid = torch.tensor([[1, 1, 1, 1, 0, 0]]).bool()
    out, mask = connector(x, valid)
    x2 = x.clone()
    x2[:, 4:] = 50.0
    out2, _ = connector(x2, valid)
    assert torch.equal(mask, valid.long())
    assert torch.allclose(out[:, :4], out2[:, :4], atol=1e-5)


def test_errors_name_the_problem():
    processor = _processor(V2_CONFIG)
    hidden, mask = _inputs()
    with pytest.raises(ValueError, match="hidden states"):
        processor(hidden[:-1], mask)
    with pytest.raises(ValueError, match="multiple of the 4"):
        processor([h[:, :6] for h in hidden], mask[:, :6])
    for bad_dim in (5, 6):  # odd; even but the wrong width
        with pytest.raises(ValueError, match="connector_attention_head_dim"):
            _processor({**V2_CONFIG, "connector_attention_head_dim": bad_dim})
    partial = {k: v for k, v in V2_CONFIG.items() if k != "caption_projection_second_linear"}
    with pytest.raises(ValueError, match="caption_projection_second_linear"):
        _processor(partial)
    with pytest.raises(ValueError, match="text_encoder_norm_type"):
        _processor({**V2_CONFIG, "text_encoder_norm_type": "range"})


def test_specs_and_video_only_stage():
    assert TEXT_EMBEDDINGS.config_section == "transformer"
    video_only = _processor(V2_CONFIG, with_audio=False)
    assert video_only.audio_connector is None and video_only(*_inputs()).audio is None
    spec = text_embeddings_spec(H, L, with_audio=False)
    assert spec.ops.rename("model.diffusion_model.audio_embeddings_connector.learnable_registers") is None
    assert spec.ops.rename("text_embedding_projection.audio_aggregate_embed.bias") is None
    assert spec.ops.rename("text_embedding_projection.video_aggregate_embed.bias") == (
        "feature_extractor.video_aggregate_embed.bias"
    )
