"""The base of the multi-device transformer wrappers: what callers read off the model passes through."""

from __future__ import annotations

import torch.distributed as dist
from torch import nn


class WrappedTransformer(nn.Module):
    """Holds `model` (an `LTXModel` or anything with its call signature) and the process `group` it runs
    over; exposes the model's `config` and `num_blocks` (read by guidance to check STG blocks)."""

    def __init__(self, model: nn.Module, group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.model = model
        self.group = group

    @property
    def config(self):
        return self.model.config

    @property
    def num_blocks(self) -> int:
        return self.model.num_blocks
