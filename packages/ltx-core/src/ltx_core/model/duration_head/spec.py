"""Building the duration head from its file (`duration_head.*`, LTX-2.5) through `build_model`."""

from __future__ import annotations

from typing import Any

from ltx_core.loader import Component, ComponentSpec, SDOps
from ltx_core.model.duration_head.model import DurationHead, DurationHeadConfig

# Its own file and a shared file alike store the head under `duration_head.`.
DURATION_HEAD_KEYS = SDOps("duration_head").keeping(prefix="duration_head.").renaming_prefix("duration_head.")


def duration_head_from_config(config: dict[str, Any]) -> DurationHead:
    return DurationHead(DurationHeadConfig.from_checkpoint_config(config))


DURATION_HEAD = ComponentSpec(
    name="duration head",
    ops=DURATION_HEAD_KEYS,
    configurator=duration_head_from_config,
    config_section="duration_head",
    expected_kind="an LTX-2.5 duration head file (ltx-2.5-duration-head-bf16.safetensors)",
    component=Component.DURATION_HEAD,
)
