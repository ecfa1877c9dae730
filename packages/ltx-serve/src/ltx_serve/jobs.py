"""What every job store shares: the `Job` row value, the `JobStore` interface, and the one column order and
row decoding the two SQL stores (`store.SqliteJobStore`, `postgres_store.PostgresJobStore`) read and write.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Job:
    """One row of the queue, as the API and the workers read it."""

    id: str
    seq: int
    created_at: float
    status: str
    progress: int
    request: dict[str, Any]
    attempts: int = 0
    max_attempts: int = 3
    error: dict[str, Any] | None = None
    claimed_by: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    phase: str | None = None
    step: int = 0
    steps: int = 0
    output: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per phase of the last attempt (encode, denoise, decode, write), for /metrics."""


class QueueFullError(Exception):
    """The queue holds `limit` active jobs already (the API answers 429)."""


class JobStore(Protocol):
    """What the API and the workers need from the queue; every method is atomic on its own."""

    def enqueue(
        self, request: dict[str, Any], *, idempotency_key: str | None, max_attempts: int, max_queued: int | None
    ) -> tuple[Job, bool]: ...
    def get(self, job_id: str) -> Job | None: ...
    def list(self, *, after: str | None, limit: int, order: str) -> tuple[list[Job], bool]: ...
    def claim(self, worker: str) -> Job | None: ...
    def heartbeat(self, job_id: str, worker: str) -> None: ...
    def progress(self, job_id: str, worker: str, *, progress: int, phase: str, step: int, steps: int) -> None: ...
    def complete(self, job_id: str, worker: str, *, output: str, timings: dict[str, float]) -> bool: ...
    def fail(self, job_id: str, worker: str, *, error: dict[str, Any], retry: bool) -> None: ...
    def cancel(self, job_id: str) -> Job | None: ...
    def is_cancelled(self, job_id: str) -> bool: ...
    def purge(self, job_id: str) -> None: ...
    def requeue_stale(self, *, older_than_s: float | None) -> list[str]: ...
    def requeue_worker(self, worker: str) -> list[str]: ...
    def cancelled_claim(self, worker: str) -> str | None: ...
    def counts(self) -> dict[str, int]: ...
    def phase_totals(self) -> dict[str, tuple[float, int]]:
        """Phase -> (seconds, jobs) summed over every job completed on this queue (deleted ones too)."""
        ...

    def close(self) -> None: ...


def new_job_id() -> str:
    return f"video_{uuid.uuid4().hex}"


# Columns in one order for both SQL back-ends (JSON columns are text).
COLUMNS = (
    "id, seq, created_at, status, progress, request, attempts, max_attempts, error, claimed_by, started_at, "
    "completed_at, phase, step, steps, output, timings"
)


# Seconds per phase summed as jobs complete (in the same transaction), so /metrics reads a few rows instead of
# every job's timings; deleting a job does not take its seconds back (Prometheus counters only grow).
PHASE_TOTALS_TABLE = (
    "CREATE TABLE IF NOT EXISTS {table} (phase TEXT PRIMARY KEY, seconds DOUBLE PRECISION NOT NULL, "
    "jobs BIGINT NOT NULL)"
)
ADD_PHASE_SECONDS = (
    "INSERT INTO {table} (phase, seconds, jobs) VALUES ({p}, {p}, 1) ON CONFLICT (phase) DO UPDATE SET "
    "seconds = {table}.seconds + excluded.seconds, jobs = {table}.jobs + 1"
)


def job_from_row(row: tuple[Any, ...]) -> Job:
    (
        id_,
        seq,
        created,
        status,
        progress,
        request,
        attempts,
        max_attempts,
        error,
        claimed_by,
        started,
        completed,
        phase,
        step,
        steps,
        output,
        timings,
    ) = row
    return Job(
        id=id_,
        seq=seq,
        created_at=created,
        status=status,
        progress=progress,
        request=json.loads(request),
        attempts=attempts,
        max_attempts=max_attempts,
        error=json.loads(error) if error else None,
        claimed_by=claimed_by,
        started_at=started,
        completed_at=completed,
        phase=phase,
        step=step,
        steps=steps,
        output=output,
        timings=json.loads(timings) if timings else {},
    )


def gave_up_error(attempts: int) -> dict[str, Any]:
    return {
        "code": "worker_lost",
        "message": f"the worker running this job stopped {attempts} times (server restarts or crashes); gave up",
    }
