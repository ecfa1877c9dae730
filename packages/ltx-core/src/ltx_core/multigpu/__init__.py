"""Several devices for one generation, on `torch.distributed` (NCCL on GPUs, gloo on CPU)."""

from ltx_core.multigpu.comm import broadcast_tensor, padded_length, world_rank
from ltx_core.multigpu.guidance_parallel import (
    GuidanceParallelDenoiser,
    GuidanceParallelTransformer,
    PassGroups,
    make_pass_groups,
    pass_group_count,
    pass_group_transformer,
)
from ltx_core.multigpu.sequence_parallel import (
    SequenceParallelTransformer,
    StreamShard,
    check_config_heads_divide,
    check_heads_divide,
)
from ltx_core.multigpu.tiled_data_parallel import TiledDataParallelTransformer

__all__ = [
    "GuidanceParallelDenoiser",
    "GuidanceParallelTransformer",
    "PassGroups",
    "SequenceParallelTransformer",
    "StreamShard",
    "TiledDataParallelTransformer",
    "broadcast_tensor",
    "check_config_heads_divide",
    "check_heads_divide",
    "make_pass_groups",
    "padded_length",
    "pass_group_count",
    "pass_group_transformer",
    "world_rank",
]
