"""Issue 32.3: `--demo` as a user meets it - a pipeline that runs its demo on one family only defaults to it,
`--demo --help` shows the demo's defaults, and every flag of every `python -m ltx_pipelines.*` command sits in a
named group (none in argparse's catch-all "options")."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ltx_pipelines
from ltx_pipelines import dfr, distilled
from ltx_pipelines.cli.flag_group import ReadContext

COMMAND_MODULES = sorted(
    info.name
    for info in pkgutil.iter_modules(ltx_pipelines.__path__)
    if not info.ispkg  # the sub-packages (cli, engine, io, demo) are libraries
)


def module_parser(name: str):
    module = importlib.import_module(f"ltx_pipelines.{name}")
    command = getattr(module, "COMMAND", None)
    if command is None:
        return module.build_parser()
    command = getattr(command, "command", command)  # the multi-device commands wrap their twin's
    return command.parser(command.help_defaults())


def test_every_command_is_checked():
    assert len(COMMAND_MODULES) == 18 and "decode" in COMMAND_MODULES and "ti2vid_one_stage_mgpu" in COMMAND_MODULES


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_no_flag_sits_in_the_catch_all_group(name):
    parser = module_parser(name)
    assert [action.option_strings for action in parser._optionals._group_actions] == []
    if name != "decode":
        flags_by_group = [{o for a in g._group_actions for o in a.option_strings} for g in parser._action_groups]
        (flags,) = [flags for flags in flags_by_group if "--demo-family" in flags]
        assert "--demo" in flags, "--demo sits beside --demo-family"


def help_text(capsys, command, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        command.parse([*argv, "--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_demo_help_shows_the_demo_defaults(capsys):
    plain = help_text(capsys, distilled.COMMAND, [])
    assert "a multiple of 64 (default: 1024)" in plain and "(default: bfloat16)" in plain
    demo = help_text(capsys, distilled.COMMAND, ["--demo"])
    assert "a multiple of 64 (default: 128)" in demo and "a multiple of 64 (default: 192)" in demo
    assert "(default: float32)" in demo and "(default: 17" in demo


def test_a_pipeline_that_runs_one_demo_family_defaults_to_it(capsys, tmp_path):
    assert "(default: ltx-2.5; this pipeline runs on: ltx-2.5)" in help_text(capsys, dfr.COMMAND, [])
    command = dfr.COMMAND
    parser = command.parser(command.help_defaults())
    args = parser.parse_args(["--demo", "--prompt", "a fox", "--output-path", str(tmp_path / "fox.mp4")])
    defaults = command.run_defaults(args)
    assert defaults.dtype == "float32"
    choice = command.models.read(args, ReadContext(defaults=defaults, demo=True)).value
    assert choice.demo_family == "ltx-2.5"
