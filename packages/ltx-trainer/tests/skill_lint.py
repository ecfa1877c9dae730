"""Doc-lint of the train-model agent skill (`.claude/skills/train-model/`): pulls every command, flag,
config field path, repository path and monitored log pattern out of the skill's markdown and checks
each against the project itself (the command parsers' --help, the pydantic schema, the files, a
captured trainer log). `lint_skill` returns the problems as text, so a test can also feed it an
altered copy of the skill and prove that the change is reported."""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shlex
import sys
import types
import typing
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

REPO_ROOT = Path(__file__).resolve().parents[3]
SKILL_DIR = REPO_ROOT / ".claude" / "skills" / "train-model"
TRAINER_CONFIGS = REPO_ROOT / "packages" / "ltx-trainer" / "configs"

# Programs whose flags belong to other tools (checked by nobody here); everything else that carries
# a --flag must be one of ours.
EXTERNAL_PROGRAMS = frozenset(
    ["bash", "cat", "cd", "cp", "curl", "df", "echo", "ffprobe", "git", "grep", "head", "hf", "kill", "ln", "ls",
     "mkdir", "nohup", "nvidia-smi", "tail", "test", "uv", "xargs"]
)  # fmt: skip
# Written by a run into its own folder, not part of the repository.
RUN_FOLDER_FILES = frozenset({"config.yaml", "training_config.yaml", "plan.md", "run-summary.md"})
SECTIONS = (
    "model", "lora", "training_strategy", "optimization", "acceleration", "data", "validation",
    "checkpoints", "hub", "flow_matching", "wandb",
)  # fmt: skip
FIELD_PATH = re.compile(r"(?<![\w/.<-])(?:" + "|".join(SECTIONS) + r")(?:\.[a-z_]+)+(?![\w/-])")
FILE_SUFFIXES = (".md", ".py", ".yaml", ".json", ".jsonl", ".log", ".safetensors", ".pt", ".mp4", ".txt")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*|-[a-zA-Z])(?![\w-])")
MODULE = re.compile(r"\b(?:ltx_trainer|ltx_pipelines|ltx_core)(?:\.[a-z_0-9]+)+")
GREP = re.compile(r"grep -o?E '([^']+)'")
CODE_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE_CODE = re.compile(r"`([^`\n]+)`")


# -- reading the skill ------------------------------------------------------------------------------
def skill_texts(root: Path = SKILL_DIR) -> dict[str, str]:
    """Every markdown file of the skill, by its path relative to the skill folder."""
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md"))}


def code_lines(text: str) -> list[str]:
    """Lines of the fenced blocks, with backslash continuations joined."""
    out: list[str] = []
    for block in CODE_BLOCK.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        out += [line.strip() for line in joined.splitlines() if line.strip()]
    return out


def inline_spans(text: str) -> list[str]:
    without_blocks = CODE_BLOCK.sub("", text)
    return [span.replace("\\|", "|") for span in INLINE_CODE.findall(without_blocks)]


@dataclass(frozen=True)
class Invocation:
    """One of our programs as the skill runs it: a module (`-m x.y`) or a script path, with its arguments."""

    target: str
    args: tuple[str, ...]
    launcher_args: tuple[str, ...] = ()
    text: str = ""

    @property
    def is_script(self) -> bool:
        return self.target.endswith(".py")


@dataclass
class Extracted:
    invocations: list[Invocation] = field(default_factory=list)
    mentioned_flags: set[str] = field(default_factory=set)
    field_paths: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)
    grep_patterns: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)


def _tokens(command: str) -> list[str]:
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    for stop in (">", "2>&1", "&", ">>"):  # redirections and backgrounding end the argument list
        if stop in tokens:
            tokens = tokens[: tokens.index(stop)]
    return tokens


def parse_command(command: str) -> Invocation | str | None:
    """An Invocation of our code, the name of an external program, or None for a mere mention."""
    tokens = _tokens(command)
    while tokens and (tokens[0] == "nohup" or re.fullmatch(r"[A-Z_]+=\S*", tokens[0])):
        tokens = tokens[1:]
    if tokens[:2] == ["uv", "run"]:
        tokens = tokens[2:]
    if not tokens:
        return None
    launcher: list[str] = []
    if tokens[:2] == ["accelerate", "launch"]:
        rest = tokens[2:]
        i = 0
        while i < len(rest) and rest[i] != "-m" and not rest[i].endswith(".py"):
            i += 1
        launcher, tokens = rest[:i], ["python", *rest[i:]]
    if tokens[0] in ("python", "python3") and len(tokens) > 1:
        if tokens[1] == "-m" and len(tokens) > 2:
            return Invocation(tokens[2], tuple(tokens[3:]), tuple(launcher), command)
        if tokens[1].endswith(".py"):
            return Invocation(tokens[1], tuple(tokens[2:]), tuple(launcher), command)
        return "python"  # python -c '...': its text is not a command line of ours
    if tokens[0] in EXTERNAL_PROGRAMS:
        return tokens[0]
    return None


def _commands(segment: str) -> Iterator[str]:
    for part in re.split(r"\s(?:&&|\||;)\s", segment):
        if part.strip():
            yield part.strip()


def extract(texts: Mapping[str, str]) -> Extracted:
    found = Extracted()
    for text in texts.values():
        segments = code_lines(text) + inline_spans(text)
        for segment in segments:
            found.grep_patterns.update(GREP.findall(segment))
            found.modules.update(MODULE.findall(segment))
            found.field_paths.update(m for m in FIELD_PATH.findall(segment) if not m.endswith(FILE_SUFFIXES))
            for token in _tokens(segment):
                if token.startswith((".claude/", "packages/", "benchmarks/", "phases/", "references/")) or (
                    re.fullmatch(r"[\w-]+\.(yaml|md)", token)
                ):
                    found.paths.add(token.rstrip(".,:;)"))
            for command in _commands(segment):
                parsed = parse_command(command)
                if isinstance(parsed, Invocation):
                    found.invocations.append(parsed)
                elif parsed is None:
                    found.mentioned_flags.update(FLAG.findall(command))
        # Patch tables: the first cell of every row of a `| Field | Value |` table is a config field.
        for table in re.findall(r"^\| Field \| Value \|\n\|[-| ]+\|\n((?:\|.*\n?)+)", text, re.M):
            for row in table.splitlines():
                cell = row.split("|")[1].strip().strip("`")
                found.field_paths.add(cell)
    return found


# -- what the project accepts -------------------------------------------------------------------------
HELP_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*|-[a-zA-Z])\b")


def _run_help(target: str) -> str:
    """`--help` of a module or script, run in-process (argparse and Typer alike), as plain text."""
    out = io.StringIO()
    argv, env = sys.argv, dict(os.environ)
    os.environ.update({"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: "found in sys.modules"
            sys.argv = [target, "--help"]
            if target.endswith(".py"):
                runpy.run_path(str(REPO_ROOT / target), run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass  # --help exits
    except Exception as exc:  # a module that does not exist or does not import: no flags
        return f"failed: {exc}"
    finally:
        sys.argv = argv
        os.environ.clear()
        os.environ.update(env)
    return re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())


def accelerate_launch_flags() -> set[str]:
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    return {option for action in parser._actions for option in action.option_strings}


class HelpCache:
    """Flags each target's --help lists (an empty set: the target does not run)."""

    def __init__(self) -> None:
        self._flags: dict[str, set[str]] = {}

    def flags(self, target: str) -> set[str]:
        if target not in self._flags:
            text = _run_help(target)
            self._flags[target] = set(HELP_FLAG.findall(text)) if "usage" in text.lower() else set()
        return self._flags[target]


def _models_in(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)
    if isinstance(annotation, types.UnionType):
        for arg in annotation.__args__:
            yield from _models_in(arg)


def field_path_exists(path: str, root: type[BaseModel] | None = None) -> bool:
    """True when `a.b.c` names a field of the trainer config (through nested, optional, list and union types;
    `training_strategy.video` and `.audio` share one model)."""
    if root is None:
        from ltx_trainer.config import LtxTrainerConfig

        root = LtxTrainerConfig
    models: list[type[BaseModel]] = [root]
    for part in path.split("."):
        annotations = [m.model_fields[part].annotation for m in models if part in m.model_fields]
        if not annotations:
            return False
        models = [m for a in annotations for m in _models_in(a)]
        models = [*models, *(sub for m in models for sub in m.__subclasses__())]
    return True


def path_exists(token: str) -> bool:
    if "<" in token:  # a placeholder inside: check the part before it
        token = token.split("<")[0].rsplit("/", 1)[0]
        if not token:
            return True
    if token in RUN_FOLDER_FILES:
        return True
    if token.startswith(("phases/", "references/")):
        return (SKILL_DIR / token).exists()
    if "/" not in token:
        names = {p.name for p in TRAINER_CONFIGS.rglob("*.yaml")} | {p.name for p in SKILL_DIR.rglob("*.md")}
        return token in names or (REPO_ROOT / token).exists()
    return (REPO_ROOT / token).exists()


def module_exists(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


# -- the lint -------------------------------------------------------------------------------------------
def lint_skill(texts: Mapping[str, str], log_lines: Iterable[str], helps: HelpCache | None = None) -> list[str]:
    helps = helps or HelpCache()
    found = extract(texts)
    problems: list[str] = []
    accelerate = accelerate_launch_flags()
    known: set[str] = set()
    for inv in found.invocations:
        if "<" in inv.target:
            continue
        flags = helps.flags(inv.target)
        if not flags:
            problems.append(f"command {inv.target!r} does not run (`{inv.text}`)")
            continue
        known |= flags
        problems += [f"{inv.target}: unknown flag {f}" for f in FLAG.findall(" ".join(inv.args)) if f not in flags]
        problems += [f"accelerate launch: unknown flag {f}" for f in FLAG.findall(" ".join(inv.launcher_args))
                     if f not in accelerate]  # fmt: skip
    for flag in sorted(found.mentioned_flags - known - accelerate):
        problems.append(f"flag {flag} is not accepted by any command the skill runs")
    problems += [f"config field {p} is not in ltx_trainer.config" for p in sorted(found.field_paths)
                 if not field_path_exists(p)]  # fmt: skip
    problems += [f"path {p} does not exist" for p in sorted(found.paths) if not path_exists(p)]
    problems += [f"module {m} does not exist" for m in sorted(found.modules) if not module_exists(m)]
    lines = list(log_lines)
    for pattern in sorted(found.grep_patterns):
        if not any(re.search(pattern, line) for line in lines):
            problems.append(f"log pattern {pattern!r} matches no line of the captured trainer log")
    return problems
