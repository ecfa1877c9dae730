"""The configuration reference (docs/configuration-reference.md), generated from the pydantic schema.

`python -m ltx_trainer.config_reference > packages/ltx-trainer/docs/configuration-reference.md`
regenerates it; a test fails when the file and the schema differ, so the page cannot drift.
"""

from __future__ import annotations

import sys
import typing
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ltx_trainer import config as schema

SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("(top level)", schema.LtxTrainerConfig),
    ("model", schema.ModelConfig),
    ("lora", schema.LoraConfig),
    ("training_strategy", schema.FlexibleStrategyConfig),
    ("training_strategy.video / .audio", schema.ModalityConfig),
    ("optimization", schema.OptimizationConfig),
    ("acceleration", schema.AccelerationConfig),
    ("data", schema.DataConfig),
    ("validation", schema.ValidationConfig),
    ("validation.samples[]", schema.ValidationSample),
    ("checkpoints", schema.CheckpointsConfig),
    ("hub", schema.HubConfig),
    ("flow_matching", schema.FlowMatchingConfig),
    ("wandb", schema.WandbConfig),
]
TRAINING_CONDITIONS = [
    schema.FirstFrameCondition,
    schema.PrefixCondition,
    schema.SuffixCondition,
    schema.SpatialCropCondition,
    schema.MaskCondition,
    schema.ReferenceCondition,
]
VALIDATION_CONDITIONS = [
    schema.FirstFrameInput,
    schema.PrefixInput,
    schema.SuffixInput,
    schema.SpatialCropInput,
    schema.MaskInput,
    schema.ReferenceInput,
    schema.VideoToAudioInput,
    schema.AudioToVideoInput,
]


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(repr(a).replace("'", '"') for a in get_args(annotation))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " \\| ".join(_type_name(a) for a in get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(get_args(annotation)[0])
    if origin in (list, tuple, dict):
        args = ", ".join(_type_name(a) for a in get_args(annotation) if a is not Ellipsis)
        return f"{origin.__name__}[{args}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value}`" if not isinstance(value, str) else f'`"{value}"`' if len(value) < 60 else "(long text)"


def _table(model: type[BaseModel]) -> list[str]:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name == "type":
            continue
        description = (field.description or "").replace("|", "\\|")
        lines.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | {description} |")
    return lines


def render_reference() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `ltx_trainer.config` by `python -m ltx_trainer.config_reference`; do not edit by hand.",
        "Every section rejects unknown fields. Errors name the field path and the accepted values.",
        "",
    ]
    for title, model in SECTIONS:
        out += [f"## `{title}`", "", *_table(model), ""]
    out += ["## Training conditions (`training_strategy.<modality>.conditions[]`, by `type`)", ""]
    for model in TRAINING_CONDITIONS:
        kind = model.model_fields["type"].default
        out += [f"### `{kind}`", "", *_table(model), ""]
    out += ["## Validation conditions (`validation.samples[].conditions[]`, by `type`)", ""]
    for model in VALIDATION_CONDITIONS:
        kind = model.model_fields["type"].default
        out += [f"### `{kind}`", "", *_table(model), ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_reference())
