"""What README.md (and docs/*.md) claim about the code, checked against the code itself: the `python -m` modules it
names, the flags it shows on their command lines, the Python names and keyword arguments its examples use, and
its pipeline table's model versions and demo families (each pipeline's `ModelFlags.model_versions` /
`demo_families`, the values its command line refuses others with).

Each check takes the document's text and returns the problems it finds (one line each), so that a test can run it
on the real file and on a deliberately broken copy. Names are read from the text and resolved at run time: nothing
here lists the modules or the flags.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import re
import shlex
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

OUR_PACKAGES = ("ltx_core", "ltx_pipelines", "ltx_trainer", "ltx_serve")

# `python -m ltx_serve` reads its own flags and hands every other one to the command lines of the pipelines it
# can serve (ltx_serve.server.parse_options: parse_known_args, then ltx_serve.pipelines.split_model_argv gives
# each served pipeline the flags its command's parser takes).
FORWARDS_OTHER_FLAGS_TO = {"ltx_serve": ("ltx_serve.pipelines", "SERVABLE")}

_MODULE = r"(?:ltx_core|ltx_pipelines|ltx_trainer|ltx_serve)(?:\.[A-Za-z_]\w*)*"
_PYTHON_M = re.compile(rf"python -m ({_MODULE})(?![\w.]*\.<)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_DOTTED = re.compile(rf"(?<![\w.])({_MODULE}\.[A-Za-z_]\w*)")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`]+)`")
_VERSION_SEPARATOR = "·"


def repo_root() -> Path:
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "README.md").is_file() and (p / "packages").is_dir())


# ---- the text ----------------------------------------------------------------------------------------------------


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Fenced blocks as (language, body)."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def prose(text: str) -> str:
    """The text outside fenced blocks."""
    return _FENCE.sub("", text)


def table_rows(text: str) -> list[list[str]]:
    """Every markdown table row outside fenced blocks, as its cells (separator rows left out)."""
    rows = []
    for line in prose(text).splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|?", line.strip()):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _command_lines(body: str) -> Iterator[str]:
    """A shell block's commands, continuation lines joined."""
    yield from body.replace("\\\n", " ").splitlines()


@dataclass(frozen=True)
class CommandLine:
    """A `python -m` command line the document shows: the module, the words before the first flag (a
    sub-command, positionals) and its flags."""

    module: str
    words: tuple[str, ...]
    flags: tuple[str, ...]


def _command_line(line: str) -> CommandLine | None:
    """The `python -m` command of one shell line, or None."""
    match = _PYTHON_M.search(line)
    if match is None:
        return None
    rest = re.split(r"\s#|\|\||&&|;|\|", line[match.end() :])[0]
    try:
        tokens = shlex.split(rest)
    except ValueError:
        tokens = rest.split()
    flags = [t.split("=")[0] for t in tokens if _FLAG.fullmatch(t.split("=")[0])]
    words = []
    for token in tokens:
        if token.startswith("-"):
            break
        words.append(token)
    return CommandLine(match.group(1), tuple(words), tuple(flags))


def command_lines(text: str) -> list[CommandLine]:
    """The `python -m` command lines of the document's shell blocks, and of its inline code that starts with
    one (`python -m ltx_core.convert to-gguf CHECKPOINT OUT.gguf --qtype Q8_0`)."""
    found = []
    for language, body in code_blocks(text):
        if language in ("bash", "sh", "shell", ""):
            found += [c for c in map(_command_line, _command_lines(body)) if c is not None]
    for span in _INLINE.findall(prose(text)):
        if re.match(r"(uv run )?python -m ", span):
            command = _command_line(" ".join(span.split()))
            if command is not None:
                found.append(command)
    return found


# ---- modules -----------------------------------------------------------------------------------------------------


def runnable(module: str) -> bool:
    """Whether `python -m <module>` finds something to run (a module, or a package with `__main__`)."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return False
    if spec is None:
        return False
    if spec.submodule_search_locations is not None:
        return importlib.util.find_spec(f"{module}.__main__") is not None
    return True


def module_problems(text: str) -> list[str]:
    names = sorted(set(_PYTHON_M.findall(text)))
    return [f"`python -m {name}`: no such runnable module" for name in names if not runnable(name)]


# ---- paths -------------------------------------------------------------------------------------------------------

_REPO_PATH = re.compile(r"^(?:packages|tests|docs|examples|benchmarks|tools|\.claude)/[\w./-]*$")


def path_problems(text: str, root: Path) -> list[str]:
    """Every repository path the document names in inline code (`packages/.../test_x.py`, `docs/serving.md`)
    exists; a file named beside one ("`test_a.py`, `test_b.py`") in the same folder as the path before it."""
    problems = []
    for span in _INLINE.findall(prose(text)):
        if _REPO_PATH.match(span) and "<" not in span and not (root / span).exists():
            problems.append(f"`{span}`: no such file or folder in the repository")
    for line in prose(text).splitlines():
        folder: Path | None = None
        for span in _INLINE.findall(line):
            if _REPO_PATH.match(span):
                folder = (root / span).parent
            elif folder is not None and re.fullmatch(r"[\w-]+\.py", span) and not (folder / span).exists():
                problems.append(f"`{span}` (beside {folder.relative_to(root)}): no such file")
    return problems


# ---- flags -------------------------------------------------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _parser_of_main(main: Callable[..., Any], words: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser that answers `--help` for `main`: caught when `main(words + ["--help"])` starts parsing with it,
    so nothing runs. Parsers without a help action (a command's first look at a few flags) parse as usual."""
    original = argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        if any(isinstance(action, argparse._HelpAction) for action in self._actions):
            raise _Captured(self)
        return original(self, *args, **kwargs)

    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    try:
        main([*words, "--help"])
    except _Captured as captured:
        return captured.parser
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]
    raise AssertionError(f"{main.__module__}.main did not parse its arguments with argparse")


def _argparse_flags(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> frozenset[str]:
    """The option strings of `parser` and of the sub-command `words` name (of every sub-command if none)."""
    flags = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            named = [action.choices[w] for w in words if w in action.choices]
            for sub in named or action.choices.values():
                flags |= _argparse_flags(sub, words)
        flags.update(action.option_strings)
    return frozenset(flags)


@cache
def accepted_flags(module: str, words: tuple[str, ...] = ()) -> frozenset[str]:
    """The flags `python -m <module> <words>` accepts: those of the argparse parser its `main` answers `--help`
    with, or of its Typer app."""
    if importlib.util.find_spec(module).submodule_search_locations is not None:  # a package: its __main__
        loaded = importlib.import_module(f"{module}.__main__")
    else:
        loaded = importlib.import_module(module)
    flags = _module_flags(loaded, words)
    forwarded = FORWARDS_OTHER_FLAGS_TO.get(module)
    if forwarded is not None:
        names_module, names = forwarded
        for name in getattr(importlib.import_module(names_module), names):
            flags |= accepted_flags(f"ltx_pipelines.{name}")
    return flags


def _module_flags(module: ModuleType, words: tuple[str, ...]) -> frozenset[str]:
    app = getattr(module, "app", None)
    if _is_typer(app):
        import typer.main

        click_command = typer.main.get_command(app)
        for word in words:
            sub = getattr(click_command, "commands", {}).get(word)
            if sub is not None:
                click_command = sub
        options = {o for p in click_command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
        return frozenset({*options, "--help"})  # click adds --help itself
    if not callable(getattr(module, "main", None)):
        return frozenset()  # no parser to build: its `__main__` block takes no flags (config_reference)
    return _argparse_flags(_parser_of_main(module.main, words), words)


def _is_typer(app: object) -> bool:
    try:
        import typer
    except ImportError:
        return False
    return isinstance(app, typer.Typer)


def row_modules(cell: str) -> list[str]:
    """The modules a table row's first cell names when it starts with `python -m X`: X, and the bare names beside
    it (`Y` meaning X's package's Y, as in "(also `ti2vid_two_stages_mgpu`)")."""
    match = re.match(rf"`python -m ({_MODULE})", cell)
    if match is None:
        return []
    first = match.group(1)
    package = first.rsplit(".", 1)[0]
    also = [f"{package}.{n}" for n in re.findall(r"`([a-z_][a-z0-9_]*)`", cell) if runnable(f"{package}.{n}")]
    return [first, *also]


def flag_problems(text: str, other_commands: tuple[str, ...] = ()) -> list[str]:
    """Flags on a `python -m` command line must be accepted by that command; flags in a table row that starts
    with a command, by each command of the row; a flag in other inline code that starts with it (`--demo`), by
    some command the document (or `other_commands`) names. Other programs' flags (`uv --version`) are not read."""
    problems = []
    for line in command_lines(text):
        if not runnable(line.module):
            continue
        accepted = accepted_flags(line.module, line.words)
        problems += [f"`python -m {line.module}` does not accept {f}" for f in line.flags if f not in accepted]
    in_rows = set()
    for cells in table_rows(text):
        modules = [m for m in row_modules(cells[0]) if runnable(m)]
        if not modules:
            continue
        in_rows.add(" | ".join(cells))
        spans = [span for span in _INLINE.findall(" | ".join(cells)) if span.startswith("-")]
        flags = sorted({f for span in spans for f in _FLAG.findall(span)})
        for module in modules:
            accepted = accepted_flags(module)
            problems += [f"table row of `{module}`: it does not accept {f}" for f in flags if f not in accepted]
    commands = {m for m in [*_PYTHON_M.findall(text), *other_commands] if runnable(m)}
    known = frozenset().union(*(accepted_flags(m) for m in commands)) if commands else frozenset()
    rest = "\n".join(line for line in prose(text).splitlines() if " | ".join(_cells(line)) not in in_rows)
    spans = [span for span in _INLINE.findall(rest) if span.startswith("--")]
    for flag in sorted({f for span in spans for f in _FLAG.findall(span)}):
        if flag not in known:
            problems.append(f"{flag}: no command the document names accepts it")
    return problems


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []


# ---- the pipeline table ------------------------------------------------------------------------------------------


def _declaring(value: object, depth: int = 0) -> object | None:
    """The object in a command's value that declares `model_versions` and `demo_families` (its model flags)."""
    if hasattr(value, "model_versions") and hasattr(value, "demo_families"):
        return value
    if depth > 3:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        children: list[object] = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, (tuple, list)):
        children = list(value)
    else:
        return None
    for child in children:
        found = _declaring(child, depth + 1)
        if found is not None:
            return found
    return None


def declared_versions(module: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(model versions, demo families) a pipeline module's command declares; None for a command without model
    flags (e.g. decode)."""
    holder = _declaring(getattr(importlib.import_module(module), "COMMAND", None))
    if holder is None:
        return None
    return tuple(holder.model_versions), tuple(holder.demo_families)


def _listed(cell: str) -> tuple[str, ...]:
    """'2 · 2.3 · 2.5 (a note)' -> ('2', '2.3', '2.5'); the notes in parentheses are not read."""
    bare = re.sub(r"\([^)]*\)", "", cell)
    return tuple(v.strip().strip("`") for v in bare.split(_VERSION_SEPARATOR) if v.strip() not in ("", "-"))


def pipeline_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the table whose header has "command", "model version" and "demo"."""
    rows = table_rows(text)
    for i, header in enumerate(rows):
        lowered = [h.lower() for h in header]
        if lowered[:1] == ["command"] and "model version" in lowered and "demo" in lowered:
            body = []
            for row in rows[i + 1 :]:
                if len(row) != len(header) or not _PYTHON_M.search(row[0]):
                    break
                body.append(row)
            return lowered, body
    return [], []


def table_problems(text: str) -> list[str]:
    """Each row's model versions and demo families are those its commands declare."""
    header, rows = pipeline_table(text)
    if not rows:
        return ["no pipeline table (a header with command | model version | demo) found"]
    versions_at, demo_at = header.index("model version"), header.index("demo")
    problems = []
    for row in rows:
        for module in row_modules(row[0]):
            if not runnable(module):
                continue
            declared = declared_versions(module)
            shown_versions, shown_demo = _listed(row[versions_at]), _listed(row[demo_at])
            if declared is None:
                if shown_versions != ("any",) or shown_demo:
                    problems.append(f"`{module}` declares no model files: its row must say 'any' and no demo")
                continue
            versions, families = declared
            if set(shown_versions) != set(versions):
                problems.append(f"`{module}`: README says model versions {shown_versions}, it runs on {versions}")
            demo = tuple(f.removeprefix("ltx-") for f in families)
            if set(shown_demo) != set(demo):
                problems.append(f"`{module}`: README says demo families {shown_demo}, its demo runs on {demo}")
    return problems


# ---- Python names ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Instance:
    """A value of one of `classes` (a union return type: any of them)."""

    classes: tuple[type, ...]


_UNKNOWN = object()
_CAMEL = re.compile(r"[A-Z][a-z0-9]+[A-Z]\w*")
"""A class name (`FinalLatents`): in prose, such a name in code is one of ours."""
_CAPITALIZED = re.compile(r"[A-Z]\w*")
"""In a Python block, a class or a constant (`VIDEO_DECODER`) must be bound or ours; a lowercase name may be a
value the example leaves to the reader (`latent`)."""


def _ours(value: object) -> bool:
    if isinstance(value, _Instance):
        return any(_ours(c) for c in value.classes)
    if isinstance(value, _Bound):
        value = value.function
    name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", "") or ""
    return name.split(".")[0] in OUR_PACKAGES


def resolve_dotted(name: str) -> object:
    """`ltx_core.loader.ModelFiles.split` -> the object (the longest importable module, then attributes)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(name)


def dotted_problems(text: str) -> list[str]:
    problems = []
    for name in sorted(set(_DOTTED.findall(text))):
        try:
            resolve_dotted(name)
        except (ImportError, AttributeError) as e:
            problems.append(f"{name}: {e}")
    return problems


def _defined_in_our_modules(name: str) -> bool:
    """Whether a loaded module of our packages defines `name` (a class the prose names without its module)."""
    for module_name, module in list(sys.modules.items()):
        if module_name.split(".")[0] in OUR_PACKAGES and name in vars(module):
            value = vars(module)[name]
            if getattr(value, "__module__", module_name).split(".")[0] in OUR_PACKAGES:
                return True
    return False


class _Names:
    """Resolves the names of the document's Python snippets: what their imports bind, what their assignments
    bind (an instance of the class called, or of a function's annotated return type), our packages' exports."""

    def __init__(self) -> None:
        self.bound: dict[str, object] = {}
        self.problems: list[str] = []
        self.strict: re.Pattern[str] | None = None
        """Unbound names of this form are problems (they must be our packages' names); None: not checked."""

    def run(self, source: str, *, where: str, strict: re.Pattern[str] | None) -> None:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        self.strict = strict
        for node in tree.body:
            self._statement(node, where)

    def _statement(self, node: ast.stmt, where: str) -> None:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                value = self._import_from(node.module, alias.name, where)
                self.bound[alias.asname or alias.name] = value
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in OUR_PACKAGES:
                    self.bound[(alias.asname or alias.name).split(".")[0]] = _UNKNOWN
                    continue
                try:
                    module = importlib.import_module(alias.name)
                except ImportError as e:
                    self.problems.append(f"{where}: import {alias.name}: {e}")
                    continue
                root = alias.name.split(".")[0]
                self.bound[alias.asname or root] = module if alias.asname else importlib.import_module(root)
            return
        if isinstance(node, ast.Assign):
            value = self._value(node.value, where)
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.bound[target.id] = value
            return
        if isinstance(node, ast.Expr):
            self._value(node.value, where)

    def _import_from(self, module: str, name: str, where: str) -> object:
        try:
            loaded = importlib.import_module(module)
        except ImportError as e:
            if module.split(".")[0] in OUR_PACKAGES:
                self.problems.append(f"{where}: from {module} import {name}: {e}")
            return _UNKNOWN
        try:
            return getattr(loaded, name)
        except AttributeError:
            try:
                return importlib.import_module(f"{module}.{name}")
            except ImportError:
                self.problems.append(f"{where}: from {module} import {name}: {module} has no {name}")
                return _UNKNOWN

    def _lookup(self, name: str, where: str) -> object:
        if name in self.bound:
            return self.bound[name]
        for package in ("ltx_pipelines", "ltx_core"):
            value = getattr(importlib.import_module(package), name, _UNKNOWN)
            # A package's submodule is not one of its exported names: `model.x` in prose is not ltx_core.model's.
            if value is not _UNKNOWN and not isinstance(value, ModuleType):
                return value
        if self.strict is not None and self.strict.fullmatch(name) and not _defined_in_our_modules(name):
            self.problems.append(f"{where}: {name} is defined nowhere in {', '.join(OUR_PACKAGES)}")
        return _UNKNOWN

    def _value(self, node: ast.expr, where: str) -> object:
        if isinstance(node, ast.Name):
            return self._lookup(node.id, where)
        if isinstance(node, ast.Attribute):
            owner = self._value(node.value, where)
            if owner is _UNKNOWN or not _ours(owner):
                return _UNKNOWN
            return self._attribute(owner, node.attr, where)
        if isinstance(node, ast.Call):
            function = self._value(node.func, where)
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                self._value(argument, where)
            if function is _UNKNOWN or not _ours(function):
                return _UNKNOWN
            return self._call(function, node, where)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._value(child, where)
        return _UNKNOWN

    def _attribute(self, owner: object, name: str, where: str) -> object:
        if isinstance(owner, _Instance):
            for cls in owner.classes:
                if hasattr(cls, name):
                    attribute = inspect.getattr_static(cls, name)
                    if isinstance(attribute, property):
                        return _returned(attribute.fget)
                    value = getattr(cls, name)
                    return _Bound(value) if inspect.isfunction(value) else _UNKNOWN
                fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
                hints = _hints(cls)
                if name in fields or name in hints:
                    return _instance_of(hints.get(name))
            shown = " | ".join(c.__name__ for c in owner.classes)
            self.problems.append(f"{where}: {shown} has no attribute {name!r}")
            return _UNKNOWN
        if isinstance(owner, _Bound):
            return _UNKNOWN
        try:
            return getattr(owner, name)
        except AttributeError:
            self.problems.append(f"{where}: {getattr(owner, '__name__', owner)} has no attribute {name!r}")
            return _UNKNOWN

    def _call(self, function: object, node: ast.Call, where: str) -> object:
        if isinstance(function, _Instance):
            cls = next((c for c in function.classes if "__call__" in dir(c)), None)
            if cls is None:
                return _UNKNOWN
            call = cls.__call__
            # A pipeline's call is its `generate` then its `decode` (README says so): a call taking anything
            # is checked against `generate`.
            generate = getattr(cls, "generate", None)
            target: object = _Bound(generate if _takes_anything(call) and generate is not None else call)
            result = _returned(call)
        elif isinstance(function, _Bound):
            target, result = function, _returned(function.function)
        elif isinstance(function, type):
            target, result = function, _Instance((function,))
        else:
            target, result = function, _returned(function)
        problem = _binding_problem(target, node)
        if problem is not None:
            self.problems.append(f"{where}: {ast.unparse(node)}: {problem}")
        return result


@dataclass(frozen=True)
class _Bound:
    """A method called on an instance (its first parameter is bound)."""

    function: Callable[..., Any]


def _takes_anything(function: Callable[..., Any]) -> bool:
    kinds = {p.kind for p in inspect.signature(function).parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds and inspect.Parameter.VAR_POSITIONAL in kinds


def _binding_problem(target: object, node: ast.Call) -> str | None:
    function: Any = target.function if isinstance(target, _Bound) else target
    if isinstance(function, type):  # a constructor: its __init__, with the instance bound
        function = function.__init__
        target = _Bound(function)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    positional: list[object] = [None] * len(node.args)
    if isinstance(target, _Bound):
        positional.insert(0, None)
    keywords = {k.arg: None for k in node.keywords if k.arg is not None}
    try:
        bound = signature.bind_partial(*positional, **keywords)
    except TypeError as e:
        return str(e)
    # `**options: Unpack[SomeTypedDict]` takes that dict's keys only.
    var_keyword = next((p for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)
    if var_keyword is not None and var_keyword.name in bound.arguments:
        allowed = _unpacked_keys(function, var_keyword)
        extra = sorted(set(bound.arguments[var_keyword.name]) - allowed) if allowed is not None else []
        if extra:
            return f"got an unexpected keyword argument {extra[0]!r} (**{var_keyword.name} takes {sorted(allowed)})"
    return None


def _unpacked_keys(function: Callable[..., Any], parameter: inspect.Parameter) -> set[str] | None:
    """The keys of the TypedDict a `**kwargs: Unpack[X]` parameter names (X may be a TYPE_CHECKING import), or
    None when the annotation is not of that form."""
    annotation = parameter.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    match = re.fullmatch(r"Unpack\[(\w+)\]", text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    name = match.group(1)
    module = sys.modules[function.__module__]
    typed_dict = getattr(module, name, None)
    if typed_dict is None:  # imported for type checking only: follow that import
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
                typed_dict = getattr(importlib.import_module(node.module), name)
    if typed_dict is None:
        return None
    return set(_hints(typed_dict)) or set(getattr(typed_dict, "__annotations__", {}))


def _hints(value: object) -> dict[str, Any]:
    try:
        return typing.get_type_hints(value)
    except Exception:  # annotations naming TYPE_CHECKING-only imports cannot be evaluated: not followed
        return {}


def _instance_of(hint: object) -> object:
    if isinstance(hint, type):
        return _Instance((hint,))
    members = typing.get_args(hint)
    if members and all(isinstance(m, type) for m in members):
        return _Instance(tuple(m for m in members if m is not type(None)))
    return _UNKNOWN


def _returned(function: object) -> object:
    if function is None:
        return _UNKNOWN
    if isinstance(function, type):
        return _Instance((function,))
    return _instance_of(_hints(function).get("return"))


def name_problems(text: str, *, prose_names_are_ours: bool = True) -> list[str]:
    """The Python code blocks, then the inline code that parses as Python, resolved in one namespace: every
    name of our packages they import, call or read exists, and every keyword argument they pass is accepted.
    An unbound capitalized name in a block, and (with `prose_names_are_ours`) a CamelCase name in the prose's
    code, must be one of our packages' (the modules the document names are imported first). Without it, prose
    may name other libraries' classes (docs/interop.md names diffusers')."""
    for module in {*_PYTHON_M.findall(text), *(m.rsplit(".", 1)[0] for m in _DOTTED.findall(text))}:
        with contextlib.suppress(ImportError):  # reported by the module and dotted-name checks
            importlib.import_module(module)
    names = _Names()
    for language, body in code_blocks(text):
        if language == "python":
            names.run(body, where=body.strip().splitlines()[0], strict=_CAPITALIZED)
    for span in (" ".join(s.split()) for s in _INLINE.findall(prose(text))):
        if span.startswith(("python -m", "uv ", "--")):
            continue
        names.run(span.replace("...", "None"), where=f"`{span}`", strict=_CAMEL if prose_names_are_ours else None)
    return [*names.problems, *dotted_problems(text)]


def all_problems(text: str) -> list[str]:
    return [*module_problems(text), *flag_problems(text), *table_problems(text), *name_problems(text)]


# ---- the tests ---------------------------------------------------------------------------------------------------

ROOT = repo_root()
README = (ROOT / "README.md").read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_COMMANDS = tuple(sorted({m for m in _PYTHON_M.findall(README) if runnable(m)}))


def test_readme_names_only_modules_that_run():
    assert module_problems(README) == []


def test_readme_names_only_paths_that_exist():
    assert path_problems(README, ROOT) == []


@pytest.mark.slow  # builds every named command's parser: imports each pipeline module (~6 s on 2 busy cores)
def test_readme_shows_only_flags_its_commands_accept():
    assert flag_problems(README) == []


def test_readme_pipeline_table_is_what_each_pipeline_declares():
    assert table_problems(README) == []
    _, rows = pipeline_table(README)
    listed = {m for row in rows for m in row_modules(row[0])}
    assert {"ltx_pipelines.distilled", "ltx_pipelines.dfr", "ltx_pipelines.decode"} <= listed


def test_readme_python_names_and_keywords_exist():
    assert name_problems(README) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_name_modules_flags_and_python_names_that_exist(doc):
    text = doc.read_text()
    problems = [
        *module_problems(text),
        *flag_problems(text, other_commands=README_COMMANDS),
        *name_problems(text, prose_names_are_ours=False),
        *path_problems(text, ROOT),
    ]
    assert problems == []


# Each check, on a copy of README with one line broken the way drift breaks it: (check, text in README, its
# broken form, a fragment of the problem reported).
BROKEN = {
    "module": (module_problems, "python -m ltx_pipelines.distilled --demo", "python -m ltx_pipelines.distiled --demo",
               "`python -m ltx_pipelines.distiled`: no such runnable module"),
    "flag on a command line": (flag_problems, "--output-path demo.mp4", "--output-file demo.mp4",
                               "`python -m ltx_pipelines.distilled` does not accept --output-file"),
    "flag in a table row": (flag_problems, "detailing pass with `--detailing-lora`",
                            "detailing pass with `--detail-lora`",
                            "table row of `ltx_pipelines.dfr`: it does not accept --detail-lora"),
    "flag in the prose": (flag_problems, "`--lora-fusion-precision {weight-dtype,float32}`",
                          "`--lora-precision {weight-dtype,float32}`",
                          "--lora-precision: no command the document names accepts it"),
    "model versions": (table_problems, "| `python -m ltx_pipelines.dfr` | 2.5 |",
                       "| `python -m ltx_pipelines.dfr` | 2.3 · 2.5 |",
                       "`ltx_pipelines.dfr`: README says model versions ('2.3', '2.5'), it runs on ('2.5',)"),
    "demo families": (table_problems, "| `python -m ltx_pipelines.lipdub` | 2 · 2.3 · 2.5 | 2.3 |",
                      "| `python -m ltx_pipelines.lipdub` | 2 · 2.3 · 2.5 | 2.3 · 2.5 |",
                      "`ltx_pipelines.lipdub`: README says demo families ('2.3', '2.5'), its demo runs on ('2.3',)"),
    "imported name": (name_problems, "DistilledPipeline, VideoRequest, demo", "DistilledPipline, VideoRequest, demo",
                      "from ltx_pipelines import DistilledPipline: ltx_pipelines has no DistilledPipline"),
    "keyword of a function": (name_problems, 'ensure_demo_assets(family="ltx-2.5")',
                              'ensure_demo_assets(model_family="ltx-2.5")',
                              "got an unexpected keyword argument 'model_family'"),
    "keyword of a constructor's options": (name_problems, 'device="cpu", dtype', 'devices="cpu", dtype',
                                           "got an unexpected keyword argument 'devices'"),
    "keyword of a pipeline call": (name_problems, "num_frames=17, frame_rate=24)", "num_frames=17, fps=24)",
                                   "got an unexpected keyword argument 'fps'"),
    "method of a returned value": (name_problems, "generation.frames_array()", "generation.frame_array()",
                                   "Generation | AudioGeneration has no attribute 'frame_array'"),
    "constant in a block": (name_problems, "build_model(VIDEO_DECODER,", "build_model(VIDEO_DECODR,",
                            "VIDEO_DECODR is defined nowhere"),
    "dotted name": (name_problems, "ltx_pipelines.engine.denoising_stage.AncestralSampler",
                    "ltx_pipelines.engine.denoising_stage.EulerSampler", "has no attribute 'EulerSampler'"),
    "class named in the prose": (name_problems, "`DurationRange`", "`DurationRanges`",
                                 "DurationRanges is defined nowhere"),
}  # fmt: skip


BROKEN["path"] = (
    lambda text: path_problems(text, ROOT),
    "`packages/ltx-pipelines/tests/pipelines/test_dfr_golden.py`, `test_dfr_layout.py`",
    "`packages/ltx-pipelines/tests/pipelines/test_dfr_golden.py`, `test_dfr_layouts.py`",
    "`test_dfr_layouts.py` (beside packages/ltx-pipelines/tests/pipelines): no such file",
)


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_each_check_fails_on_a_broken_readme(case):
    check, line, broken, fragment = BROKEN[case]
    assert line in README, f"README no longer holds {line!r}: pick another line for this case"
    problems = check(README.replace(line, broken, 1))
    assert any(fragment in problem for problem in problems), problems
