"""`python -m ltx_serve` flags: localhost unless a key is given, server flags apart from the pipeline's."""

from __future__ import annotations

import pytest

from ltx_serve.server import parse_options


def test_remote_bind_without_key_is_refused(capsys, monkeypatch) -> None:
    monkeypatch.delenv("LTX_SERVE_API_KEY", raising=False)
    with pytest.raises(SystemExit) as stop:
        parse_options(["--host", "0.0.0.0", "--demo"])
    assert stop.value.code == 2 and "--api-key" in capsys.readouterr().err


def test_remote_bind_with_key_from_env(monkeypatch) -> None:
    monkeypatch.setenv("LTX_SERVE_API_KEY", "k")
    options = parse_options(["--host", "0.0.0.0", "--demo"])
    assert options.api_key == "k" and options.host == "0.0.0.0"


def test_pipeline_flags_go_to_workers_and_loras_become_request_names() -> None:
    options = parse_options(
        ["--demo", "--lora", "/m/style.safetensors", "0.7", "--workers", "2", "--lora", "/m/cam.safetensors",
         "--quantization", "fp8-cast"]
    )  # fmt: skip
    assert options.devices == ["cpu", "cpu"]
    assert options.model_argv == {"distilled": ("--demo", "--quantization", "fp8-cast")}
    assert options.limits.loras == {"style": "/m/style.safetensors", "cam": "/m/cam.safetensors"}
    assert options.limits.default_size == "64x64"


def test_devices_and_workers_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse_options(["--devices", "cuda:0", "--workers", "2"])


def test_gemma_stays_resident_unless_the_server_is_told_to_free_it() -> None:
    from ltx_serve.server import Supervisor

    for argv, resident in ((["--demo"], True), (["--demo", "--free-text-encoder"], False)):
        options = parse_options(argv)
        assert options.resident_text_encoder is resident
        configs = Supervisor(options, store=None).configs  # type: ignore[arg-type]
        assert all(c.resident_text_encoder is resident for c in configs.values())
