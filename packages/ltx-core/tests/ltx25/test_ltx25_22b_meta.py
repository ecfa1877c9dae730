"""The 22B LTX-2.5 transformer builds on the meta device: the released LTX-2.3 22B sizes with the
LTX-2.5 flags of the set's transformer file, and exactly the parameters those flags add and remove
(ff biases and the model-level prompt AdaLN go, the (1, D) keyframe embedding comes)."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.loader import read_checkpoint_config
from ltx_core.model.transformer import AV_TRANSFORMER

pytestmark = pytest.mark.golden

LTX25_FLAGS = (
    "ff_bias",
    "audio_ff_bias",
    "connector_ff_bias",
    "use_prompt_adaln_single",
    "use_keyframes_abs_pos_embedding",
)
# The reference transformer configurator's values for flags a config leaves out (a 2.5.0 file may carry no
# keyframe embedding flag, the released 2.3 config none of these).
FLAG_DEFAULTS = {
    "ff_bias": True,
    "audio_ff_bias": True,
    "use_prompt_adaln_single": True,
    "use_keyframes_abs_pos_embedding": False,
}


def test_22b_ltx25_transformer_builds_on_meta(golden_dir, ltx25_files):
    path = golden_dir / "ltx-2.3-22b-keys.json"
    if not path.is_file():
        pytest.skip(f"{path.name} is not in {golden_dir}")
    released = json.loads(path.read_text())
    flags = read_checkpoint_config(ltx25_files.source("transformer").path, "transformer")
    config = json.loads(json.dumps(released["config"]))
    config["transformer"].update({k: flags[k] for k in LTX25_FLAGS if k in flags})
    with torch.device("meta"):
        model = AV_TRANSFORMER.configurator(config)
    got = sum(p.numel() for p in model.parameters())

    # Expected from the released 2.3 key list: drop what the flags remove, add what they add.
    t = {**FLAG_DEFAULTS, **config["transformer"]}
    removed = set()
    for file_key in released["keys"]:
        module_key = AV_TRANSFORMER.ops.rename(file_key)
        if module_key is None:
            continue
        is_ff_bias = module_key.endswith("bias") and (".ff.net." in module_key or ".audio_ff.net." in module_key)
        if is_ff_bias and (
            (".audio_ff." in module_key and not t["audio_ff_bias"])
            or (".ff." in module_key and ".audio_ff." not in module_key and not t["ff_bias"])
        ):
            removed.add(file_key)
        if (
            module_key.split(".")[0] in ("prompt_adaln_single", "audio_prompt_adaln_single")
            and not t["use_prompt_adaln_single"]
        ):
            removed.add(file_key)
    numel = {k: int(torch.Size(shape).numel()) for k, (shape, _) in released["keys"].items()}
    kept = sum(n for k, n in numel.items() if AV_TRANSFORMER.ops.rename(k) is not None and k not in removed)
    added = t["num_attention_heads"] * t["attention_head_dim"] if t["use_keyframes_abs_pos_embedding"] else 0
    assert got == kept + added
    # "22B" counts the transformer with the text connectors; the DiT alone is ~19B.
    assert 18e9 < got < 20e9, f"{got} parameters is not the 22B release's transformer"
