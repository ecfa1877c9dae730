"""What identifies a machine for kernel timings: CPU model and flags, torch version, GPU name.

A timing decision is only valid where it was measured: another CPU (other vector units), another
torch (other kernels) or another GPU gets its own decisions (`MachineKey.fingerprint` names the file).
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import asdict, dataclass

import torch

# Flags that decide which CPU kernels are fast: printed by the benchmarks and `python -m ltx_core.tune`.
CAPABILITY_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")


@dataclass(frozen=True)
class MachineKey:
    cpu_model: str
    cpu_flags: tuple[str, ...]
    torch_version: str
    gpu: str | None = None

    def fingerprint(self) -> str:
        """16 hex digits of a hash over every field: the cache file name of this machine's decisions."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        return {**asdict(self), "cpu_flags": list(self.cpu_flags)}

    @classmethod
    def from_json(cls, data: dict) -> MachineKey:
        return cls(data["cpu_model"], tuple(data["cpu_flags"]), data["torch_version"], data.get("gpu"))

    def capability(self) -> str:
        """One line naming the CPU and which of `CAPABILITY_FLAGS` it has (e.g. for benchmark output)."""
        have = [f for f in CAPABILITY_FLAGS if f in self.cpu_flags]
        lacks = [f for f in CAPABILITY_FLAGS if f not in self.cpu_flags]
        gpu = f"; GPU {self.gpu}" if self.gpu else ""
        flags = f"has {' '.join(have) or '-'}; lacks {' '.join(lacks) or '-'}"
        return f"CPU {self.cpu_model}: {flags}; torch {self.torch_version}{gpu}"


def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    model, flags = "", ()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:  # x86 / ARM
                    flags = tuple(sorted(set(value.split())))
                if model and flags:
                    break
    except OSError:
        pass  # not Linux: the platform's processor string alone (flags unknown)
    return model or platform.processor() or platform.machine(), flags


def this_machine() -> MachineKey:
    model, flags = _cpuinfo()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return MachineKey(model, flags, torch.__version__, gpu)
