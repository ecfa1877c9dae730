"""GPU check: one denoising step of the LTX-2.3 22B transformer architecture at 768 x 512 x 121.

Random bf16 weights (the architecture from `tests/golden/ltx-2.3-22b-keys.json`, built on the meta
device and materialised directly on the GPU), one transformer forward per step, for each variant:

    bf16-sdpa        bf16 weights, PyTorch SDPA
    bf16-fa3         bf16 weights, FlashAttention 3 (skipped when not installed / not Hopper)
    fp8-cast         block Linears stored float8, upcast per call (SDPA or the best automatic backend)
    fp8-scaled-mm    block Linears float8 with per-tensor scales through torch._scaled_mm
    bf16-compile     bf16, every block torch.compile'd (inductor, dynamic token axis)
    bf16-stream2     bf16, blocks streamed from pinned host memory through 2 GPU slots
    train-lora       one LoRA training step (rank 32 on to_q/k/v/out, bf16 base, bf16 autocast, AdamW):
    train-lora-gc    forward, MSE loss, backward, optimizer step; "-gc" with gradient checkpointing,
    train-int8-gc    "int8" with the base quantized by optimum-quanto (skipped when not installed)
    train-fp8-gc     the fp8-cast base (`acceleration.quantization: fp8-cast`) with gradient checkpointing
    train-offload-gc gradient checkpointing with the block inputs offloaded to host memory
    train-plan-12    the setting the memory plan picks for a 12 / 16 / 24 GiB card (the trainer docs' table:
    train-plan-16    checkpointing, activation offload, fp8-cast, N blocks swapped from pinned host memory);
    train-plan-24    run on this GPU whatever its size, so its peak is compared with the card it is meant for

    guidance-parallel  one guided step (cond, CFG, STG, modality: 4 passes, one call each, as the pipelines
                     run them) on one GPU, then with the passes spread over the GPUs present (2-4 ranks, NCCL,
                     `ltx_core.multigpu.guidance_parallel`): seconds per step both ways, the speed-up, the x0
                     bytes broadcast per step (`benchmarks/guidance_parallel_comm.py`) and max |difference| of the
                     guided x0 against the one-GPU step. With one GPU only the one-GPU step is measured.
                     `--dry-run` prints the pass groups and bytes per step for 2, 4 and 8 GPUs (no GPU needed).

    step-cache       the step cache (`--step-cache`, First-Block-Cache) at this size: seconds per call of the plain
                     transformer, of a cached call that computes every block (the wrapper's overhead) and of one
                     that reuses the deep residual (block 0 + the output layers), the peak memory the stored
                     residuals add, and the stage speed-up those give at reuse fractions of 25/40/50% (the reuse a
                     run gets depends on its real weights and prompt: `benchmarks/step_cache_guided.py` counts it
                     on the golden runs; random weights say nothing about it).

For the training variants the memory plan's estimate (`ltx_trainer.memory_plan`) is printed beside the
measured peak; `--plan-only` prints just the estimates (no GPU needed).

The settings runs (`settings-12gb`, `settings-16gb`, `settings-24gb`) play a card of that size on the GPU lent:
the process may allocate only that much (`torch.cuda.set_per_process_memory_fraction`), `--offload auto`'s
choice for the 22B distilled run at this size is made from the released sizes (`ltx_core.offload_table`),
and the transformer runs in the mode it picked (full, fp8-cast, blocks streamed from pinned RAM or from a
file on disk) for one stage-1 step (half size) and one stage-2 step. Printed: the picks, wall time per step,
the peak GPU memory against the estimate of those phases. (The text encoder's fp8 / streamed modes are built
by ltx_core's Gemma loader; here only its pick is printed.) `--dry-run` prints the picks and estimates only
(no GPU needed).

Printed per variant: seconds per step (median of --steps after a warm-up), x8 for the 8-step
distilled schedule, achieved TFLOP/s (FLOPs counted once with torch's FlopCounterMode on the SDPA
run) and peak GPU memory. Targets from other servers on an H100 for this size: 8 steps in 9.5 s
(bf16) / 7.55 s (fp8).

    python benchmarks/gpu/check_22b.py                      # all variants
    python benchmarks/gpu/check_22b.py --variants bf16-sdpa fp8-cast --steps 2
    python benchmarks/gpu/check_22b.py --blocks 8           # a quick smoke run
    python benchmarks/gpu/check_22b.py --variants settings-12gb settings-16gb settings-24gb
    python benchmarks/gpu/check_22b.py --variants settings-12gb --dry-run   # picks and estimates, no GPU
    python benchmarks/gpu/check_22b.py --variants guidance-parallel --steps 2
    python benchmarks/gpu/check_22b.py --variants guidance-parallel --dry-run  # pass groups and bytes, no GPU
    python benchmarks/gpu/check_22b.py --variants step-cache --steps 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from ltx_core.model.transformer import Modality, configure_transformer

VARIANTS = ("bf16-sdpa", "bf16-fa3", "fp8-cast", "fp8-scaled-mm", "bf16-compile", "bf16-stream2")
TRAIN_VARIANTS = (
    "train-lora", "train-lora-gc", "train-int8-gc", "train-fp8-gc", "train-offload-gc",
    "train-plan-12", "train-plan-16", "train-plan-24",
)  # fmt: skip
SETTINGS_VARIANTS = ("settings-12gb", "settings-16gb", "settings-24gb")
MULTI_GPU_VARIANTS = ("guidance-parallel",)
STEP_CACHE_VARIANTS = ("step-cache",)
REUSE_FRACTIONS = (0.25, 0.4, 0.5)
GUIDED_PASSES = 4
"""cond, negative prompt (CFG), STG-perturbed, modality-isolated: the LTX-2.3 guided defaults' passes."""
_KEYS = Path(__file__).resolve().parents[2] / "tests" / "golden" / "ltx-2.3-22b-keys.json"


def _config(blocks: int | None) -> dict:
    path = Path(os.environ["LTX_GOLDEN_DIR"]) / _KEYS.name if "LTX_GOLDEN_DIR" in os.environ else _KEYS
    config = json.loads(path.read_text())["config"]
    if blocks:
        config["transformer"]["num_layers"] = blocks
    return config


def random_model(config: dict, device: torch.device) -> torch.nn.Module:
    with torch.device("meta"):
        model = configure_transformer(config)
    model = model.to(torch.bfloat16).to_empty(device=device)  # allocate once, directly in bf16
    g = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "table" in name:
                p.normal_(0.0, 0.05, generator=g)
            elif name.endswith("norm.weight") or "norm_" in name:
                p.fill_(1.0)
            elif p.ndim > 1:
                p.normal_(0.0, p.shape[-1] ** -0.5, generator=g)
            else:
                p.zero_()
    return model.eval().requires_grad_(False)


def inputs(model: torch.nn.Module, frames: int, height: int, width: int, text: int, device: torch.device):
    c = model.config
    f, h, w = (frames - 1) // 8 + 1, height // 32, width // 32
    grid = torch.stack(torch.meshgrid(torch.arange(f), torch.arange(h), torch.arange(w), indexing="ij"), 0)
    grid = grid.reshape(3, -1).float()
    step = torch.tensor([8 / 24, 32.0, 32.0])[:, None]
    video_pos = torch.stack([grid * step, grid * step + step], -1)[None].to(device)
    audio_tokens = round(frames / 24 * 25)
    t = torch.arange(audio_tokens, dtype=torch.float32) * 0.04
    audio_pos = torch.stack([t, t + 0.04], -1)[None, None].to(device)
    g = torch.Generator(device=device).manual_seed(1)
    sigma = torch.tensor([0.9], device=device)

    def mod(tokens: int, channels: int, pos: torch.Tensor, context_dim: int) -> Modality:
        return Modality(
            latent=torch.randn(1, tokens, channels, device=device, generator=g, dtype=torch.bfloat16),
            timesteps=torch.full((1, tokens, 1), 0.9, device=device, dtype=torch.bfloat16),
            sigma=sigma,
            positions=pos,
            context=torch.randn(
                1, text, c.caption_channels or context_dim, device=device, generator=g, dtype=torch.bfloat16
            ),
        )

    return (
        mod(f * h * w, c.video.in_channels, video_pos, c.video.context_dim),
        mod(audio_tokens, c.audio.in_channels, audio_pos, c.audio.context_dim),
    )


def to_fp8_cast(model: torch.nn.Module) -> None:
    from ltx_core.quantization import Fp8CastPolicy

    for name in Fp8CastPolicy().prepare(model):
        module = model.get_submodule(name)
        module.weight = torch.nn.Parameter(module.weight.to(torch.float8_e4m3fn), requires_grad=False)
        if module.bias is not None:
            module.bias = torch.nn.Parameter(module.bias.to(torch.float8_e4m3fn), requires_grad=False)


def to_fp8_scaled_mm(model: torch.nn.Module) -> None:
    """Per-tensor weight scales (amax / 448); a static input scale of 1 stands in for calibrated ones."""
    from ltx_core.quantization import Fp8CastPolicy, ScaledMMLinear

    for name in Fp8CastPolicy().module_names(model):
        module = model.get_submodule(name)
        scale = (module.weight.float().abs().amax() / torch.finfo(torch.float8_e4m3fn).max).clamp(min=1e-12)
        weight = (module.weight.float() / scale).to(torch.float8_e4m3fn)
        module.__class__ = ScaledMMLinear
        module.weight = torch.nn.Parameter(weight, requires_grad=False)
        module.register_buffer("weight_scale", scale.reshape(()))
        module.register_buffer("input_scale", torch.ones((), device=weight.device))


def timed_steps(model, video, audio, steps: int) -> float:
    times = []
    with torch.inference_mode():
        model(video, audio)  # warm-up (and compilation)
        for _ in range(steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(video, audio)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def count_flops(model, video, audio) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        model(video, audio)
    return counter.get_total_flops()


def _shape(args: argparse.Namespace):
    from ltx_trainer.training.memory_estimate import TrainingShape

    f, h, w = (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32
    return TrainingShape(f * h * w, round(args.frames / 24 * 25), args.text_tokens)


def _train_settings(name: str, args: argparse.Namespace):
    from ltx_trainer.training.memory_estimate import TrainingSettings, _Planner

    if name.startswith("train-plan-"):
        # The memory plan's fastest fitting setting for that card (as `python -m ltx_trainer.memory_table`).
        budget = int(float(name.rsplit("-", 1)[1]) * 2**30 * 0.95)
        found = _Planner(_config(args.blocks), _shape(args), "cuda").first_fitting(
            TrainingSettings(lora_rank=32), budget
        )
        if found is None:
            raise ValueError(f"{name}: the plan finds no setting that fits")
        return found[0]
    return TrainingSettings(
        lora_rank=32,
        quantization="int8-quanto" if "int8" in name else "fp8-cast" if "fp8" in name else None,
        gradient_checkpointing=name.endswith("-gc"),
        offload_activations="offload" in name,
    )


def plan_estimate(name: str, args: argparse.Namespace) -> dict:
    from ltx_trainer.training.memory_estimate import estimate_training_memory

    settings = _train_settings(name, args)
    estimate = estimate_training_memory(_config(args.blocks), settings, _shape(args), device="cuda")
    # The step below builds no text connectors (contexts are given): compare its step without them.
    step = estimate.step - (0 if estimate.connectors_released else estimate.connectors)
    return {"plan_gib": round(step / 2**30, 2), "plan": estimate.describe(), "settings": settings.describe()}


def swap_training_blocks(model: torch.nn.Module, settings, device: torch.device) -> None:
    """Activation offload and block swap as the trainer sets them up (blocks in pinned host memory)."""
    from ltx_core.block_streaming import stream_loaded_blocks
    from ltx_trainer.training.activation_offload import enable_activation_offload

    enable_activation_offload(model, settings.offload_activations)
    if settings.blocks_to_swap:
        streamer = stream_loaded_blocks(model, device, device_slots=model.num_blocks - settings.blocks_to_swap)
        streamer.for_training(checkpointing=settings.gradient_checkpointing)
        model.block_streamer = streamer
        gc.collect()
        torch.cuda.empty_cache()


def run_training_step(name: str, args: argparse.Namespace, device: torch.device) -> dict:
    from ltx_trainer.training.block_swap import adapter_stand_ins
    from ltx_trainer.training.lora_files import add_lora

    settings = _train_settings(name, args)
    torch.cuda.empty_cache()
    plan = plan_estimate(name, args)
    free = torch.cuda.mem_get_info(device)[0]
    # The plan decides what is tried: a variant it puts well over the free memory (no checkpointing at
    # 121 frames needs ~200 GiB) would only spend the GPU's minutes running out of memory.
    if plan["plan_gib"] * 2**30 > 1.1 * free:
        return {
            "variant": name,
            "skipped": f"the memory plan needs {plan['plan_gib']} GiB, {free / 2**30:.1f} GiB free",
        }
    torch.cuda.reset_peak_memory_stats(device)
    model = random_model(_config(args.blocks), device)
    video, audio = inputs(model, args.frames, args.height, args.width, args.text_tokens, device)
    if settings.quantization:
        try:
            from ltx_trainer.training.quantization import quantize_transformer
        except ImportError as e:
            return {"variant": name, "skipped": str(e)}
    if settings.quantization == "fp8-cast":
        to_fp8_cast(model)
    elif settings.quantization:
        quantize_transformer(model, settings.quantization, device, progress=False)
    model.set_gradient_checkpointing(settings.gradient_checkpointing)
    swap_training_blocks(model, settings, device)
    with adapter_stand_ins(model, torch.bfloat16, device):
        model = add_lora(model, 32, 32, 0.0, ["to_q", "to_k", "to_v", "to_out.0"])
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    target_v, target_a = torch.randn_like(video.latent), torch.randn_like(audio.latent)
    times = []
    torch.cuda.reset_peak_memory_stats(device)
    for _ in range(args.steps + 1):  # the first step warms up
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", torch.bfloat16):
            v, a = model(video, audio)
        loss = (v.float() - target_v).square().mean() + (a.float() - target_a).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    result = {
        "variant": name,
        "seconds_per_step": round(statistics.median(times[1:]), 3),
        "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
        **plan,
    }
    del model, optimizer, video, audio
    gc.collect()
    torch.cuda.empty_cache()
    return result


def settings_choice(name: str, args: argparse.Namespace):
    """`--offload auto`'s choice for a card of the variant's size, from the released sizes at this run size."""
    from ltx_core.offload_table import TableRun, choices, released_runs

    card_gib = int(name.removeprefix("settings-").removesuffix("gb"))
    golden = Path(os.environ["LTX_GOLDEN_DIR"]) if "LTX_GOLDEN_DIR" in os.environ else _KEYS.parent
    sizes = released_runs(golden)[0].sizes
    run = TableRun("22B distilled", sizes, args.height, args.width, args.frames)
    (choice,) = choices(run, cards=(card_gib,))
    return card_gib, run, choice


def settings_plan(name: str, args: argparse.Namespace, picked=None) -> dict:
    card_gib, _run, choice = picked or settings_choice(name, args)
    phases = {p.name: round(p.device / 2**30, 2) for p in choice.estimate.phases}
    return {
        "variant": name, "card_gib": card_gib, "fits": choice.fits, "pick": choice.cell(),
        "reasons": choice.log_lines(), "estimate_gib": phases,
    }  # fmt: skip


def _stream_from_disk(model: torch.nn.Module, device: torch.device, folder: Path):
    """Write the blocks to a safetensors file and stream them from it (2 host slots), as `--offload disk` does."""
    from safetensors.torch import save_file

    from ltx_core.block_streaming import attach_block_streaming
    from ltx_core.loader.sd_ops import SDOps
    from ltx_core.loader.tensorwise import WeightConversion

    path = folder / "blocks.safetensors"
    blocks = {k: v.contiguous() for k, v in model.state_dict().items() if k.startswith("transformer_blocks.")}
    save_file({k: v.cpu() for k, v in blocks.items()}, str(path))
    for block in model.transformer_blocks:
        block.to(torch.device("meta"))
    del blocks
    conversion = WeightConversion(dtype=torch.bfloat16)
    ops = SDOps("benchmark blocks").keeping(prefix="transformer_blocks.")
    return attach_block_streaming(
        model, path, ops, conversion, device=device, source="disk", device_slots=2, host_slots=2, prefetch=1,
        blocks_attr="transformer_blocks",
    )  # fmt: skip


def run_settings(name: str, args: argparse.Namespace, device: torch.device) -> dict:
    import tempfile

    from ltx_core.block_streaming import stream_loaded_blocks

    picked = settings_choice(name, args)
    card_gib, _run, choice = picked
    plan = settings_plan(name, args, picked)
    if not choice.fits:
        return {**plan, "skipped": "the estimate says nothing fits"}
    mode = choice.transformer.mode
    total = torch.cuda.get_device_properties(device).total_memory
    if card_gib * 2**30 > total:
        return {**plan, "skipped": f"the GPU has only {total / 2**30:.0f} GiB"}
    torch.cuda.empty_cache()
    # Built at full size first (random weights are made on the GPU), then cut down to the mode and capped.
    model = random_model(_config(args.blocks), device)
    streamer = None
    folder = tempfile.TemporaryDirectory(prefix="ltx-settings-")
    if mode == "fp8":
        to_fp8_cast(model)
    elif mode == "stream-ram":
        streamer = stream_loaded_blocks(model, device, device_slots=2)
    elif mode == "stream-disk":
        streamer = _stream_from_disk(model, device, Path(folder.name))
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(card_gib * 2**30 / total, device)
    torch.cuda.reset_peak_memory_stats(device)
    result = {**plan, "transformer_mode": mode}
    try:
        for stage, scale in (("stage_1", 2), ("stage_2", 1)):
            video, audio = inputs(
                model, args.frames, args.height // scale, args.width // scale, args.text_tokens, device
            )
            start = time.perf_counter()
            with torch.inference_mode():
                model(video, audio)
            torch.cuda.synchronize()
            result[f"{stage}_seconds_per_step"] = round(time.perf_counter() - start, 3)
            del video, audio
        result["peak_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        result["estimate_transformer_gib"] = max(plan["estimate_gib"].get(k, 0) for k in ("stage 1", "stage 2"))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        if streamer is not None:
            streamer.close()
        del model
        gc.collect()
        torch.cuda.empty_cache()
        folder.cleanup()
    return result


def _guided_step_parts(model: torch.nn.Module, args: argparse.Namespace, device: torch.device):
    """(video, audio) latent states, the positive and negative contexts and the 4-pass guidance of one step."""
    from ltx_core.components.guiders import MultiModalGuiderParams
    from ltx_core.types import LatentState

    video, audio = inputs(model, args.frames, args.height, args.width, args.text_tokens, device)
    states = tuple(
        LatentState(m.latent, torch.ones_like(m.latent[..., :1], dtype=torch.float32), m.positions,
                    torch.zeros_like(m.latent))
        for m in (video, audio)
    )  # fmt: skip
    g = torch.Generator(device=device).manual_seed(2)
    negative = tuple(
        torch.randn(m.context.shape, device=device, generator=g, dtype=m.context.dtype) for m in (video, audio)
    )
    block = min(28, model.num_blocks - 1)
    guidance = MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(block,), modality_scale=3.0)
    return states, (video.context, audio.context), negative, guidance


def _timed_guided_step(denoiser, states, steps: int) -> tuple[float, torch.Tensor]:
    times = []
    with torch.inference_mode():
        x0, _ = denoiser(*states, 0.9, 0)  # warm-up
        for _ in range(steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            x0, _ = denoiser(*states, 0.9, 0)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times), x0


def guidance_parallel_job(rank: int, world: int, args: argparse.Namespace, out_path: str) -> None:
    """One rank of the guidance-parallel measurement: rank 0 first times the one-GPU step, then every rank the
    spread step; rank 0 writes both times and the x0 difference to `out_path` (JSON)."""
    import torch.distributed as dist

    from ltx_core.components.denoisers import GuidedDenoiser
    from ltx_core.model.transformer import X0Model
    from ltx_core.multigpu.guidance_parallel import (
        GuidanceParallelDenoiser,
        make_pass_groups,
        pass_group_count,
        pass_group_transformer,
    )

    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    model = random_model(_config(args.blocks), device)  # same seed on every GPU: the same weights
    states, positive, negative, guidance = _guided_step_parts(model, args, device)
    kwargs = {"negative_video_context": negative[0], "negative_audio_context": negative[1],
              "video_guidance": guidance, "audio_guidance": guidance, "max_batch_size": 1}  # fmt: skip
    single = None
    if rank == 0:
        single = _timed_guided_step(GuidedDenoiser(X0Model(model), *positive, **kwargs), states, args.steps)
    dist.barrier()
    groups = make_pass_groups(pass_group_count(world, GUIDED_PASSES))
    spread = GuidanceParallelDenoiser(X0Model(pass_group_transformer(model, groups)), groups, *positive, **kwargs)
    seconds, x0 = _timed_guided_step(spread, states, args.steps)
    if rank == 0:
        assert single is not None
        Path(out_path).write_text(json.dumps({
            "one_gpu_seconds_per_step": round(single[0], 3), "seconds_per_step": round(seconds, 3),
            "speedup": round(single[0] / seconds, 2), "pass_groups": f"{groups.count} x {groups.size}",
            "max_abs_diff_vs_one_gpu": float((x0.float() - single[1].float()).abs().max()),
        }))  # fmt: skip


def guidance_parallel_plan(args: argparse.Namespace, worlds: tuple[int, ...] = (2, 4, 8)) -> dict:
    """Pass groups and bytes per step (each rank's receive) for `worlds` GPUs, from the 22B shapes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from guidance_parallel_comm import guidance_parallel_elements, sequence_parallel_elements, widths_22b

    from ltx_core.multigpu import pass_group_count

    w = widths_22b()
    f, h, wd = (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32
    tokens = {"video": f * h * wd, "audio": round(args.frames / 24 * 25)}
    plan = {}
    for world in worlds:
        groups = pass_group_count(world, GUIDED_PASSES)
        spread = guidance_parallel_elements(w, tokens, world, GUIDED_PASSES, 1) * 2  # bf16
        sequence = sequence_parallel_elements(w, tokens, world, GUIDED_PASSES) * 2
        plan[str(world)] = {
            "pass_groups": f"{groups} x {world // groups}",
            "guidance_parallel_MiB": round(spread / 2**20, 2),
            "sequence_parallel_MiB": round(sequence / 2**20, 1),
        }
    return {"variant": "guidance-parallel", "bytes_per_step_per_rank": plan}


def run_guidance_parallel(args: argparse.Namespace, device: torch.device) -> dict:
    import tempfile

    from ltx_core.components.denoisers import GuidedDenoiser
    from ltx_core.model.transformer import X0Model
    from ltx_core.multigpu.launch import run_ranks

    plan = guidance_parallel_plan(args)
    count = torch.cuda.device_count()
    if count < 2:
        # One GPU: the one-GPU guided step only (what the spread step is compared with on a larger machine).
        torch.cuda.empty_cache()
        model = random_model(_config(args.blocks), device)
        states, positive, negative, guidance = _guided_step_parts(model, args, device)
        denoiser = GuidedDenoiser(
            X0Model(model), *positive, negative_video_context=negative[0], negative_audio_context=negative[1],
            video_guidance=guidance, audio_guidance=guidance, max_batch_size=1,
        )  # fmt: skip
        seconds, _ = _timed_guided_step(denoiser, states, args.steps)
        del model, denoiser, states
        gc.collect()
        torch.cuda.empty_cache()
        return {**plan, "one_gpu_seconds_per_step": round(seconds, 3),
                "skipped_parallel": f"guidance parallel needs >= 2 GPUs, {count} present"}  # fmt: skip
    world = min(count, GUIDED_PASSES)
    with tempfile.TemporaryDirectory(prefix="ltx-gpar-") as folder:
        out = Path(folder, "result.json")
        run_ranks(guidance_parallel_job, world, args=(args, str(out)), backend="nccl", timeout_s=1800)
        measured = json.loads(out.read_text())
    return {**plan, "world": world, **measured}


def run_step_cache(args: argparse.Namespace, device: torch.device) -> dict:
    """Per-call cost of the step cache's full and reusing calls at real size (see the module doc)."""
    from ltx_core.components.step_cache import StepCachedTransformer

    torch.cuda.empty_cache()
    model = random_model(_config(args.blocks), device)
    video, audio = inputs(model, args.frames, args.height, args.width, args.text_tokens, device)
    plain = timed_steps(model, video, audio, args.steps)
    base_peak = torch.cuda.max_memory_allocated(device)
    # A threshold no change is below computes every block; one every change is below reuses from the 2nd call on.
    computing = timed_steps(StepCachedTransformer(model, threshold=1e-30), video, audio, args.steps)
    torch.cuda.reset_peak_memory_stats(device)
    reusing_model = StepCachedTransformer(model, threshold=float("inf"))
    reusing = timed_steps(reusing_model, video, audio, args.steps)
    assert reusing_model.stats.reused == reusing_model.stats.calls - 1, reusing_model.stats
    cached_peak = torch.cuda.max_memory_allocated(device)
    ratio = reusing / plain
    del model, reusing_model, video, audio
    gc.collect()
    torch.cuda.empty_cache()
    return {
        "variant": "step-cache",
        "seconds_per_call": {"plain": round(plain, 3), "cached_computing": round(computing, 3),
                             "cached_reusing": round(reusing, 3)},
        "reused_call_over_plain": round(ratio, 3),
        "stage_speedup_at_reuse": {f"{f:.0%}": round(1 / (1 - f * (1 - ratio)), 2) for f in REUSE_FRACTIONS},
        "peak_gib": {"plain": round(base_peak / 2**30, 2), "cached": round(cached_peak / 2**30, 2)},
    }  # fmt: skip


def run_variant(name: str, args: argparse.Namespace, device: torch.device, flops: dict) -> dict | None:
    if name in STEP_CACHE_VARIANTS:
        return run_step_cache(args, device)
    if name in MULTI_GPU_VARIANTS:
        return run_guidance_parallel(args, device)
    if name in TRAIN_VARIANTS:
        return run_training_step(name, args, device)
    if name in SETTINGS_VARIANTS:
        return run_settings(name, args, device)
    from ltx_core.compilation import CompileConfig, compile_blocks
    from ltx_core.model.transformer.attention_backends import check_backend, set_attention_backend
    from ltx_core.quantization import supports_scaled_mm

    backend = "sdpa"
    if name == "bf16-fa3":
        try:
            check_backend("flash3", device)
        except ValueError as e:
            return {"variant": name, "skipped": str(e)}
        backend = "flash3"
    if name == "fp8-scaled-mm" and not supports_scaled_mm(device):
        return {"variant": name, "skipped": "no native float8 matmul on this GPU"}
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    model = random_model(_config(args.blocks), device)
    video, audio = inputs(model, args.frames, args.height, args.width, args.text_tokens, device)
    set_attention_backend(model, backend if name != "fp8-cast" else None, device)
    streamer = None
    if name == "fp8-cast":
        to_fp8_cast(model)
    elif name == "fp8-scaled-mm":
        to_fp8_scaled_mm(model)
    elif name == "bf16-compile":
        compile_blocks(model.transformer_blocks, CompileConfig())
    elif name == "bf16-stream2":
        from ltx_core.block_streaming import stream_loaded_blocks

        streamer = stream_loaded_blocks(model, device, device_slots=2)
        gc.collect()
        torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    if "total" not in flops:
        flops["total"] = count_flops(model, video, audio)
    seconds = timed_steps(model, video, audio, args.steps)
    result = {
        "variant": name,
        "seconds_per_step": round(seconds, 3),
        "seconds_8_steps": round(8 * seconds, 2),
        "tflops": round(flops["total"] / seconds / 1e12, 1),
        "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
        "video_tokens": video.latent.shape[1],
        "audio_tokens": audio.latent.shape[1],
    }
    if streamer is not None:
        streamer.close()
    del model, video, audio
    gc.collect()
    torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=[*VARIANTS, *TRAIN_VARIANTS, *SETTINGS_VARIANTS, *MULTI_GPU_VARIANTS, *STEP_CACHE_VARIANTS],
        choices=VARIANTS + TRAIN_VARIANTS + SETTINGS_VARIANTS + MULTI_GPU_VARIANTS + STEP_CACHE_VARIANTS,
    )
    parser.add_argument(
        "--dry-run", action="store_true",
        help="print the settings variants' picks and estimates and the guidance-parallel bytes per step",
    )  # fmt: skip
    parser.add_argument("--plan-only", action="store_true", help="print the training variants' memory estimates")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--text-tokens", type=int, default=1024)
    parser.add_argument("--blocks", type=int, default=None, help="override the block count (smoke runs)")
    args = parser.parse_args()
    if args.dry_run:
        for name in (v for v in args.variants if v in SETTINGS_VARIANTS):
            print(json.dumps(settings_plan(name, args)), flush=True)
        if "guidance-parallel" in args.variants:
            print(json.dumps(guidance_parallel_plan(args)), flush=True)
        return
    if args.plan_only:
        for name in (v for v in args.variants if v in TRAIN_VARIANTS):
            print(json.dumps({"variant": name, **plan_estimate(name, args)}), flush=True)
        return
    if not torch.cuda.is_available():
        sys.exit("check_22b.py needs a CUDA GPU")
    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}", flush=True)
    flops: dict = {}
    for name in args.variants:
        try:
            result = run_variant(name, args, device, flops)
        except Exception as e:  # report and carry on: one failing variant must not hide the others
            result = {"variant": name, "error": f"{type(e).__name__}: {e}"[:500]}
            gc.collect()
            torch.cuda.empty_cache()
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
