"""README's memory table is the output of `python -m ltx_core.offload_table`, and its sizes are the released
key list's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from ltx_core.generation_memory import TextEncoderSize, generation_sizes
from ltx_core.offload_table import KEYS_FILE, markdown_table, released_runs

pytestmark = pytest.mark.golden

README = Path(__file__).resolve().parents[4] / "README.md"


@pytest.mark.slow
def test_readme_table_is_the_scripts_output(golden_dir):
    text = README.read_text()
    found = re.search(r"<!-- offload-table:start -->\n(.*?)\n<!-- offload-table:end -->", text, re.S)
    assert found, "README.md has no offload-table markers"
    assert found.group(1).strip() == markdown_table(released_runs(golden_dir)), (
        "README's memory table is stale: paste `uv run python -m ltx_core.offload_table` between its markers"
    )


@pytest.mark.slow
def test_the_22b_distilled_at_768x512x121_fits_12_gb_by_itself(golden_dir):
    run = released_runs(golden_dir)[0]
    assert (run.height, run.width, run.frames) == (512, 768, 121)
    from ltx_core.offload_table import choices

    (choice,) = choices(run, cards=(12,))
    assert choice.fits, choice.log_lines()
    assert choice.estimate.peak <= 0.9 * 12 * 2**30


@pytest.mark.slow  # meta-device builds of the 22B models
def test_sizes_are_the_released_key_lists(golden_dir):
    released = json.loads((golden_dir / KEYS_FILE).read_text())
    numel: dict[str, int] = {}
    for key, (shape, _dtype) in released["keys"].items():
        component = released["key_components"][key]
        numel[component] = numel.get(component, 0) + int(torch.Size(shape).numel())
    gemma = released["gemma_text_config"]  # the connectors' input: every hidden state of this Gemma
    text = TextEncoderSize(
        layer_linear=0, layer_other=0, num_layers=gemma["num_hidden_layers"], embedding=0, other=0,
        hidden_size=gemma["hidden_size"], intermediate_size=0, num_heads=1, head_dim=1, num_kv_heads=1,
    )  # fmt: skip
    sizes = generation_sizes(released["config"], text)
    t = sizes.transformer
    assert t.non_block + t.num_blocks * t.block == numel["transformer"]
    assert sizes.text_embeddings == numel["text_embeddings"]
    assert sizes.video_encoder == numel["vae_encoder"]
    assert sizes.vocoder == numel["vocoder"]
    # The decoders add the latent statistics (buffers the key list files under the encoders): mean and std
    # per latent channel, as the key list gives them.
    def statistics(prefix: str) -> int:
        keys = (f"{prefix}.per_channel_statistics.mean-of-means", f"{prefix}.per_channel_statistics.std-of-means")
        return sum(int(torch.Size(released["keys"][key][0]).numel()) for key in keys)

    assert sizes.video_decoder - numel["vae_decoder"] == statistics("vae")
    assert sizes.audio_decoder - numel["audio_vae_decoder"] == statistics("audio_vae")
