"""Starting N ranks on one machine: free port, process-group set-up, and a spawner that fails fast.

`run_ranks(fn, world, args)` starts one process per rank (torch.multiprocessing, spawn context),
each calling `fn(rank, world, *args)` inside an initialised process group. When any rank raises,
every other rank is terminated and the caller gets a `RankFailedError` carrying the traceback of
the rank that failed first (the others' collectives fail after it); a run longer than `timeout_s`
is terminated the same way. Under `torchrun` (RANK, WORLD_SIZE, MASTER_ADDR/PORT set),
`init_process_group(rank, world, backend)` joins that group through the environment.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

logger = logging.getLogger(__name__)


class RankFailedError(RuntimeError):
    """A rank of a multi-process run raised (message: the rank and its traceback) or the run timed out."""


def find_free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_backend(device: torch.device | str) -> str:
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def init_process_group(
    rank: int, world: int, backend: str, init_method: str | None = None, timeout_s: float = 300.0
) -> None:
    """Join the default process group (`init_method` None: the torchrun environment variables)."""
    dist.init_process_group(
        backend=backend,
        init_method=init_method or "env://",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def rank_thread_count(world: int) -> int:
    """The CPU threads each of `world` ranks started by `run_ranks` computes with: they share the cores."""
    return max(1, (os.cpu_count() or 1) // world)


@contextmanager
def computing_as_a_rank(world: int) -> Iterator[None]:
    """Compute in this block with a rank's thread count. CPU kernels' reduction order depends on the thread
    count, so a single-process result compared bit for bit with the ranks' must be computed this way."""
    before = torch.get_num_threads()
    torch.set_num_threads(rank_thread_count(world))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _rank_entry(rank: int, fn: Callable[..., Any], world: int, backend: str, init_method: str,
                timeout_s: float, args: tuple, report_dir: str) -> None:  # fmt: skip
    torch.set_num_threads(rank_thread_count(world))
    init_process_group(rank, world, backend, init_method, timeout_s)
    try:
        fn(rank, world, *args)
    except BaseException:
        # When one rank fails, the others' collectives fail next; the time stamp (taken before this
        # rank's connections close) lets the launcher name the rank that failed first.
        Path(report_dir, f"rank{rank}.txt").write_text(f"{time.time()!r}\n{traceback.format_exc()}")
        raise
    finally:
        dist.destroy_process_group()


def _first_failure(report_dir: str) -> tuple[int, str] | None:
    reports = []
    for path in Path(report_dir).glob("rank*.txt"):
        stamp, _, text = path.read_text().partition("\n")
        reports.append((float(stamp), int(path.stem[4:]), text))
    if not reports:
        return None
    _, rank, text = min(reports)
    return rank, text


def run_ranks(
    fn: Callable[..., Any],
    world: int,
    args: tuple = (),
    backend: str = "gloo",
    timeout_s: float = 600.0,
) -> None:
    """Run `fn(rank, world, *args)` in `world` fresh processes; raise `RankFailedError` on the first failure."""
    if world < 1:
        raise ValueError(f"the number of processes must be >= 1, got {world}")
    init_method = f"tcp://127.0.0.1:{find_free_port()}"
    with tempfile.TemporaryDirectory(prefix="ltx-ranks-") as report_dir:
        context = mp.start_processes(
            _rank_entry,
            args=(fn, world, backend, init_method, timeout_s, args, report_dir),
            nprocs=world,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout_s
        try:
            while not context.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise RankFailedError(f"the {world}-process run did not finish within {timeout_s:.0f} s")
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as error:
            first = _first_failure(report_dir)
            if first is not None:
                raise RankFailedError(f"rank {first[0]} failed:\n{first[1]}") from None
            if isinstance(error, mp.ProcessRaisedException):
                raise RankFailedError(f"rank {error.error_index} failed:\n{error.msg}") from None
            raise RankFailedError(f"rank {error.error_index} exited with code {error.exit_code}") from None
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
            for process in context.processes:
                process.join(5)
