"""State-dict operations: immutable rules that select, rename and rewrite checkpoint tensors.

A rule set (`SDOps`) answers two questions about a file key:
1. Is this key read at all?  It is when some `keep` pattern matches and no `drop` pattern does.
   Keys that are not read are never loaded from disk.
2. What does it become?  Renames are applied in order; then the first value operation whose
   pattern matches the *renamed* key may rewrite the tensor into any number of (key, tensor)
   pairs (split a fused projection, emit an extra scale, or drop it with an empty list).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import torch


@dataclass(frozen=True)
class KeyPattern:
    """Matches a key that starts with `prefix`, ends with `suffix` and contains `contains` (all optional)."""

    prefix: str = ""
    suffix: str = ""
    contains: str = ""

    def matches(self, key: str) -> bool:
        return key.startswith(self.prefix) and key.endswith(self.suffix) and self.contains in key


@dataclass(frozen=True)
class KeyRename:
    """Replace `old` by `new`: at the start of the key only (`prefix_only`), or everywhere."""

    old: str
    new: str
    prefix_only: bool = True

    def apply(self, key: str) -> str:
        if self.prefix_only:
            return self.new + key[len(self.old) :] if key.startswith(self.old) else key
        return key.replace(self.old, self.new)


@dataclass(frozen=True)
class KeyMap:
    """Exact renames from a table (a file layout's whole key list): a listed key becomes its partner,
    any other key passes unchanged. One dictionary lookup per key, however long the table."""

    pairs: tuple[tuple[str, str], ...]
    _lookup: dict[str, str] = field(init=False, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lookup", dict(self.pairs))

    def apply(self, key: str) -> str:
        return self._lookup.get(key, key)


ValueFn = Callable[[str, torch.Tensor], list[tuple[str, torch.Tensor]]]


@dataclass(frozen=True)
class ValueOp:
    pattern: KeyPattern
    fn: ValueFn = field(compare=False)


@dataclass(frozen=True)
class SDOps:
    """A named, immutable rule set. Build one with the chaining methods, each returning a new value."""

    name: str
    keep: tuple[KeyPattern, ...] = ()
    drop: tuple[KeyPattern, ...] = ()
    renames: tuple[KeyRename | KeyMap, ...] = ()
    value_ops: tuple[ValueOp, ...] = ()
    # A file layout's own translation, run on every file key before these rules (e.g. diffusers
    # names -> the released single-file names), so one component rule set serves every layout.
    pre: SDOps | None = None

    # -- construction -------------------------------------------------------------------------
    def keeping(self, prefix: str = "", suffix: str = "", contains: str = "") -> SDOps:
        return replace(self, keep=(*self.keep, KeyPattern(prefix, suffix, contains)))

    def dropping(self, prefix: str = "", suffix: str = "", contains: str = "") -> SDOps:
        return replace(self, drop=(*self.drop, KeyPattern(prefix, suffix, contains)))

    def renaming_prefix(self, old: str, new: str = "") -> SDOps:
        return replace(self, renames=(*self.renames, KeyRename(old, new, prefix_only=True)))

    def replacing(self, old: str, new: str) -> SDOps:
        return replace(self, renames=(*self.renames, KeyRename(old, new, prefix_only=False)))

    def renaming_keys(self, mapping: Mapping[str, str]) -> SDOps:
        """Rename exactly the keys of `mapping` (sorted, so equal tables give equal rule sets)."""
        return replace(self, renames=(*self.renames, KeyMap(tuple(sorted(mapping.items())))))

    def with_value_op(self, fn: ValueFn, prefix: str = "", suffix: str = "", contains: str = "") -> SDOps:
        return replace(self, value_ops=(*self.value_ops, ValueOp(KeyPattern(prefix, suffix, contains), fn)))

    def named(self, name: str) -> SDOps:
        return replace(self, name=name)

    def after(self, pre: SDOps | None) -> SDOps:
        """These rules applied to the keys (and tensors) that `pre` produces from a file; `pre=None`
        leaves the rules as they are."""
        if pre is None:
            return self
        inner = pre if self.pre is None else self.pre.after(pre)
        return replace(self, name=f"{pre.name}>{self.name}", pre=inner)

    def then(self, other: SDOps) -> SDOps:
        """Concatenate two rule sets: keep/drop patterns are united, renames and value ops run in order."""
        return SDOps(
            name=f"{self.name}+{other.name}",
            keep=self.keep + other.keep,
            drop=self.drop + other.drop,
            renames=self.renames + other.renames,
            value_ops=self.value_ops + other.value_ops,
        )

    @property
    def changes_values(self) -> bool:
        """True when a value operation (its own or its layout translation's) may change a tensor, so the
        stored bytes are not the module's tensor."""
        return bool(self.value_ops) or (self.pre is not None and self.pre.changes_values)

    # -- application --------------------------------------------------------------------------
    def selects(self, key: str) -> bool:
        if self.pre is not None:
            inner = self.pre.rename(key)
            return inner is not None and self._selects_own(inner)
        return self._selects_own(key)

    def _selects_own(self, key: str) -> bool:
        return any(p.matches(key) for p in self.keep) and not any(p.matches(key) for p in self.drop)

    def rename(self, key: str) -> str | None:
        """The module key for file key `key`, or None when the key is not read."""
        if self.pre is not None:
            inner = self.pre.rename(key)
            return None if inner is None else self._rename_own(inner)
        return self._rename_own(key)

    def _rename_own(self, key: str) -> str | None:
        if not self._selects_own(key):
            return None
        for r in self.renames:
            key = r.apply(key)
        return key

    def translate(self, file_key: str, tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
        """Every (module key, tensor) pair file tensor `file_key` becomes (none when it is not read):
        the layout translation `pre` first, with its own value operations, then these rules."""
        pairs = [(file_key, tensor)] if self.pre is None else self.pre.translate(file_key, tensor)
        out: list[tuple[str, torch.Tensor]] = []
        for key, value in pairs:
            module_key = self._rename_own(key)
            if module_key is not None:
                out.extend(self.apply_value(module_key, value))
        return out

    def apply_value(self, module_key: str, tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
        for op in self.value_ops:
            if op.pattern.matches(module_key):
                return op.fn(module_key, tensor)
        return [(module_key, tensor)]
