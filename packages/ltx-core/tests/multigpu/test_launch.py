"""The rank launcher: a failing rank ends every rank with its error, well within the timeout."""

from __future__ import annotations

import pytest
from rank_jobs import fail_on_rank_job

from ltx_core.multigpu.launch import RankFailedError, find_free_port, run_ranks


def test_a_failing_rank_ends_the_run_with_its_error():
    # The other rank waits in a barrier that never completes: only fail-fast ends it before the
    # timeout, whose error ("did not finish within") would not match.
    with pytest.raises(RankFailedError, match=r"rank 1 failed(.|\n)*ValueError: boom on rank 1"):
        run_ranks(fail_on_rank_job, 2, args=(1, "boom on rank 1"), timeout_s=60)


def test_world_size_must_be_positive():
    with pytest.raises(ValueError, match="must be >= 1, got 0"):
        run_ranks(fail_on_rank_job, 0, args=(1, "unused"))


def test_free_port_is_bindable():
    import socket

    port = find_free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
