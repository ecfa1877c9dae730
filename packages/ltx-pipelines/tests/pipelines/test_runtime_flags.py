"""--quantization / --offload / --compile / --attention-backend reach the transformer (--gemma-8bit the text
encoder), and what cannot run on the machine is refused before any model loads (exit 2, naming the value and
the alternative)."""

from __future__ import annotations

import json

import pytest
import torch

from ltx_core.runtime import RuntimeOptions
from ltx_pipelines.distilled import main


@pytest.fixture(autouse=True)
def _demo_cache(monkeypatch, demo_cache_home):
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo_cache_home))


def demo_argv(out, *extra: str) -> list[str]:
    return ["--demo", "--prompt", "a fox", "--output-path", str(out), "--device", "cpu", "--log-level", "WARNING",
            "--num-frames", "9", "--height", "64", "--width", "64", *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--quantization", "fp8-scaled-mm"], ["fp8-scaled-mm", "fp8-cast"]),
        (["--attention-backend", "flash3"], ["flash3"]),
        (["--compile", "nonsense"], ["nonsense"]),
        (["--gemma-8bit"], ["--gemma-8bit needs a CUDA device (this run uses cpu)"]),
    ],
)
def test_what_cannot_run_here_exits_2_before_loading(tmp_path, capsys, monkeypatch, extra, fragments):
    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", _refuse)
    with pytest.raises(SystemExit) as info:
        main(demo_argv(tmp_path / "x.mp4", *extra))
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, err
    assert not (tmp_path / "x.mp4").exists()


def _refuse(*args, **kwargs):
    raise AssertionError("a model was built although the arguments were refused")


@pytest.mark.slow
def test_fp8_with_disk_streaming_writes_the_same_video_as_fp8_alone(tmp_path):
    plain = tmp_path / "fp8.mp4"
    streamed = tmp_path / "fp8_disk.mp4"
    assert main(demo_argv(plain, "--quantization", "fp8-cast")) == 0
    assert main(demo_argv(streamed, "--quantization", "fp8-cast", "--offload", "disk")) == 0
    assert plain.read_bytes() == streamed.read_bytes()
    parameters = json.loads(streamed.with_suffix(".json").read_text())["parameters"]
    assert (parameters["quantization"], parameters["offload"]) == ("fp8-cast", "disk")


@pytest.mark.slow
def test_fp8_cast_changes_the_video_a_plain_load_makes(tmp_path):
    # Control for the test above: the flag reaches the model (float8 weights give other frames).
    plain = tmp_path / "plain.mp4"
    quantized = tmp_path / "fp8.mp4"
    assert main(demo_argv(plain)) == 0
    assert main(demo_argv(quantized, "--quantization", "fp8-cast")) == 0
    assert plain.read_bytes() != quantized.read_bytes()


def test_default_flags_mean_a_plain_load():
    import argparse

    from ltx_pipelines.cli.flag_group import ReadContext, add_groups
    from ltx_pipelines.cli.runtime_flags import RuntimeFlags
    from ltx_pipelines.engine.model_versions import LTX_2_3_DEFAULTS

    def options(argv: list[str]) -> RuntimeOptions | None:
        parser = argparse.ArgumentParser()
        add_groups(parser, (RuntimeFlags(),), LTX_2_3_DEFAULTS)
        context = ReadContext(defaults=LTX_2_3_DEFAULTS, demo=False)
        return RuntimeFlags().read(parser.parse_args(["--device", "cpu", *argv]), context).value.options

    assert options([]) is None
    assert options(["--offload", "cpu"]) == RuntimeOptions(offload="cpu")


def test_a_run_that_cannot_fit_stops_with_the_estimate_and_the_flags_that_would(tmp_path, capsys, monkeypatch):
    # Free memory is only known on CUDA; pretend the device reports 2 MiB free so the check runs here.
    monkeypatch.setattr("ltx_core.devices.available_memory", lambda device: 2 * 2**20)
    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", _refuse)
    with pytest.raises(SystemExit) as info:
        main(demo_argv(tmp_path / "x.mp4"))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "RAM is available" in err and "GiB" in err  # a CPU run: the host RAM is the limit


def test_a_long_clip_counts_its_decoded_frames_in_host_ram(tmp_path, capsys, monkeypatch):
    """1000 s at 64 x 64: its float32 frames (1.2 GB) and its 48 kHz track's decode do not fit in 4 GiB, where the
    models alone would."""
    monkeypatch.setattr("ltx_core.devices.available_memory", lambda device: 4 * 2**30)
    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", _refuse)
    with pytest.raises(SystemExit) as info:
        main([*demo_argv(tmp_path / "x.mp4"), "--num-frames", "24001"])
    assert info.value.code == 2
    assert "decoded output on the host" in capsys.readouterr().err


def test_a_run_that_fits_is_not_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr("ltx_core.devices.available_memory", lambda device: 64 * 2**30)
    assert main(demo_argv(tmp_path / "x.mp4")) == 0


@pytest.mark.parametrize(
    ("extra", "mode"),
    [(["--offload", "disk"], "stream-disk"), (["--offload", "disk", "--text-encoder-mode", "fp8"], "fp8")],
)
def test_offload_streams_gemma_too_unless_the_text_encoder_mode_is_given(tmp_path, monkeypatch, extra, mode):
    seen = []
    from ltx_core.text_encoders.gemma import text_encoder

    real = text_encoder.GemmaTextEncoder.from_folder.__func__

    def recording(cls, *args, **kwargs):
        seen.append(kwargs.get("mode", "full"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(text_encoder.GemmaTextEncoder, "from_folder", classmethod(recording))
    assert main(demo_argv(tmp_path / "disk.mp4", *extra)) == 0
    assert seen == [mode]


@pytest.mark.slow
def test_a_gguf_gemma_encodes_the_prompt_through_gemma_root(tmp_path, demo_cache_home, monkeypatch, capsys):
    """`--gemma-root` takes a GGUF Gemma 3 (here the demo Gemma written by `to-gguf`): the run completes, and a
    GGUF of another architecture is refused with exit status 2 before any model is built."""
    from ltx_core.convert import gemma_folder_to_gguf_file
    from ltx_core.loader.gguf_file import write_gguf
    from ltx_pipelines.demo import default_demo_dir, demo_assets_at

    gguf = gemma_folder_to_gguf_file(
        demo_assets_at(default_demo_dir()).gemma_root, tmp_path / "gemma.gguf", qtype="F16"
    )
    assert main(demo_argv(tmp_path / "gguf.mp4", "--gemma-root", str(gguf))) == 0
    assert (tmp_path / "gguf.mp4").is_file()
    other = tmp_path / "transformer.gguf"
    write_gguf(other, {"model.diffusion_model.x.weight": torch.zeros(4, 4)}, {}, "F16")
    monkeypatch.setattr("ltx_pipelines.engine.model_loading.build_model", _refuse)
    with pytest.raises(SystemExit) as info:
        main(demo_argv(tmp_path / "other.mp4", "--gemma-root", str(other)))
    assert info.value.code == 2
    assert "architecture 'ltxv'; a Gemma text encoder is 'gemma3'" in capsys.readouterr().err
