"""Checkpoint reading, key rules, model building and LoRA fusion."""

from ltx_core.loader.builder import (
    ComponentSpec,
    Configurator,
    build_model,
    check_state_dict_fits,
    checkpoint_config,
    free_model_weights,
)
from ltx_core.loader.cache import StateDictCache
from ltx_core.loader.component_source import Component, ComponentSource
from ltx_core.loader.errors import CheckpointError
from ltx_core.loader.file_index import SafetensorsHeader, TensorInfo
from ltx_core.loader.key_rules import (
    AUDIO_DECODER_KEYS,
    AUDIO_ENCODER_KEYS,
    COMFY_LORA_KEYS,
    TEXT_EMBEDDINGS_KEYS,
    TRANSFORMER_KEYS,
    UPSAMPLER_KEYS,
    VIDEO_DECODER_KEYS,
    VIDEO_ENCODER_KEYS,
    VOCODER_KEYS,
)
from ltx_core.loader.lora import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec, fuse_loras, lora_metadata
from ltx_core.loader.lora_layouts import LoraLayout, LoraWeights, read_lora
from ltx_core.loader.model_files import COMPONENT_FLAGS, Layout, ModelFiles, read_checkpoint_config
from ltx_core.loader.safetensors_header import parse_model_version, read_metadata, read_safetensors_header
from ltx_core.loader.sd_ops import KeyPattern, KeyRename, SDOps
from ltx_core.loader.state_dict import StateDict, load_state_dict, selected_keys, stored_float_dtypes

__all__ = [
    "AUDIO_DECODER_KEYS",
    "AUDIO_ENCODER_KEYS",
    "COMFY_LORA_KEYS",
    "COMPONENT_FLAGS",
    "DEFAULT_LORA_FUSION",
    "TEXT_EMBEDDINGS_KEYS",
    "TRANSFORMER_KEYS",
    "UPSAMPLER_KEYS",
    "VIDEO_DECODER_KEYS",
    "VIDEO_ENCODER_KEYS",
    "VOCODER_KEYS",
    "CheckpointError",
    "Component",
    "ComponentSource",
    "ComponentSpec",
    "Configurator",
    "KeyPattern",
    "KeyRename",
    "Layout",
    "LoraFusionPrecision",
    "LoraLayout",
    "LoraSpec",
    "LoraWeights",
    "ModelFiles",
    "SDOps",
    "SafetensorsHeader",
    "StateDict",
    "StateDictCache",
    "TensorInfo",
    "build_model",
    "check_state_dict_fits",
    "checkpoint_config",
    "free_model_weights",
    "fuse_loras",
    "load_state_dict",
    "lora_metadata",
    "parse_model_version",
    "read_checkpoint_config",
    "read_lora",
    "read_metadata",
    "read_safetensors_header",
    "selected_keys",
    "stored_float_dtypes",
]
