"""Kernel paths chosen by measurement on this machine (see `choices`); `python -m ltx_core.tune`
times the usual shapes up front and prints the decisions."""

from ltx_core.tune.choices import (
    CLOSE_CALL,
    FORCE_ENV,
    KERNEL_PATHS,
    Decision,
    KernelChoices,
    OpKey,
    attach,
    choose_fastest,
    default_cache_dir,
    owned_choices,
    parse_forced,
    size_class,
    time_call,
)
from ltx_core.tune.machine import CAPABILITY_FLAGS, MachineKey, this_machine

__all__ = [
    "CAPABILITY_FLAGS",
    "CLOSE_CALL",
    "FORCE_ENV",
    "KERNEL_PATHS",
    "Decision",
    "KernelChoices",
    "MachineKey",
    "OpKey",
    "attach",
    "choose_fastest",
    "default_cache_dir",
    "owned_choices",
    "parse_forced",
    "size_class",
    "this_machine",
    "time_call",
]
