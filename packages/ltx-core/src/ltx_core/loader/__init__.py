"""Checkpoint reading, key rules, model building and LoRA fusion."""

from __future__ import annotations

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "ComponentSpec": "ltx_core.loader.builder",
    "Configurator": "ltx_core.loader.builder",
    "build_model": "ltx_core.loader.builder",
    "check_state_dict_fits": "ltx_core.loader.builder",
    "checkpoint_config": "ltx_core.loader.builder",
    "free_model_weights": "ltx_core.loader.builder",
    "StateDictCache": "ltx_core.loader.cache",
    "Component": "ltx_core.loader.components",
    "ComponentSource": "ltx_core.loader.component_source",
    "CheckpointError": "ltx_core.loader.errors",
    "SafetensorsHeader": "ltx_core.loader.file_index",
    "TensorInfo": "ltx_core.loader.file_index",
    "AUDIO_DECODER_KEYS": "ltx_core.loader.key_rules",
    "AUDIO_ENCODER_KEYS": "ltx_core.loader.key_rules",
    "COMFY_LORA_KEYS": "ltx_core.loader.key_rules",
    "TEXT_EMBEDDINGS_KEYS": "ltx_core.loader.key_rules",
    "TRANSFORMER_KEYS": "ltx_core.loader.key_rules",
    "UPSAMPLER_KEYS": "ltx_core.loader.key_rules",
    "VIDEO_DECODER_KEYS": "ltx_core.loader.key_rules",
    "VIDEO_ENCODER_KEYS": "ltx_core.loader.key_rules",
    "VOCODER_KEYS": "ltx_core.loader.key_rules",
    "DEFAULT_LORA_FUSION": "ltx_core.loader.lora_spec",
    "LoraFusionPrecision": "ltx_core.loader.lora_spec",
    "LoraSpec": "ltx_core.loader.lora_spec",
    "fuse_loras": "ltx_core.loader.lora",
    "lora_metadata": "ltx_core.loader.lora",
    "LoraLayout": "ltx_core.loader.lora_layouts",
    "LoraWeights": "ltx_core.loader.lora_layouts",
    "read_lora": "ltx_core.loader.lora_layouts",
    "COMPONENT_FLAGS": "ltx_core.loader.components",
    "Layout": "ltx_core.loader.components",
    "ModelFiles": "ltx_core.loader.model_files",
    "read_checkpoint_config": "ltx_core.loader.model_files",
    "parse_model_version": "ltx_core.model_version",
    "read_metadata": "ltx_core.loader.safetensors_header",
    "read_safetensors_header": "ltx_core.loader.safetensors_header",
    "KeyPattern": "ltx_core.loader.sd_ops",
    "KeyRename": "ltx_core.loader.sd_ops",
    "SDOps": "ltx_core.loader.sd_ops",
    "StateDict": "ltx_core.loader.state_dict",
    "load_state_dict": "ltx_core.loader.state_dict",
    "selected_keys": "ltx_core.loader.state_dict",
    "stored_float_dtypes": "ltx_core.loader.state_dict",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
