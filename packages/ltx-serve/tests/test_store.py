"""The job stores (SQLite, and PostgreSQL started by `pgserver`): idempotent enqueue, atomic claims across
processes, requeue after a crash."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from ltx_serve.jobs import QueueFullError
from ltx_serve.store import open_store


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory):
    pgserver = pytest.importorskip("pgserver")
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()


@pytest.fixture(params=["sqlite", "postgres"])
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh queue's `--queue` value for each back-end."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'q.db'}"
    url = request.getfixturevalue("postgres_url")
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS ltx_serve_jobs")
    return url


def test_enqueue_is_idempotent_per_key(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    first, created = store.enqueue({"prompt": "a"}, idempotency_key="k1", max_attempts=3)
    again, created_again = store.enqueue({"prompt": "b"}, idempotency_key="k1", max_attempts=3)
    other, _ = store.enqueue({"prompt": "c"}, idempotency_key=None, max_attempts=3)
    assert created and not created_again
    assert again.id == first.id and again.request == {"prompt": "a"}
    assert other.id != first.id


def test_queue_limit_counts_queued_jobs(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    store.enqueue({}, idempotency_key=None, max_attempts=1, max_queued=2)
    store.enqueue({}, idempotency_key=None, max_attempts=1, max_queued=2)
    with pytest.raises(QueueFullError):
        store.enqueue({}, idempotency_key=None, max_attempts=1, max_queued=2)
    assert store.claim("w") is not None  # a claimed job no longer counts against the queue
    store.enqueue({}, idempotency_key=None, max_attempts=1, max_queued=2)


def test_claims_are_fifo_and_exclusive(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    ids = [store.enqueue({"i": i}, idempotency_key=None, max_attempts=1)[0].id for i in range(3)]
    claimed = [store.claim("w1"), store.claim("w2"), store.claim("w1"), store.claim("w2")]
    assert [j.id for j in claimed[:3] if j] == ids and claimed[3] is None
    assert all(j.status == "in_progress" and j.attempts == 1 for j in claimed[:3] if j)


def _claim_all(queue: str, out: multiprocessing.Queue) -> None:
    store = open_store(queue, Path("."))
    got = []
    while (job := store.claim("w")) is not None:
        got.append(job.id)
    out.put(got)


def test_concurrent_processes_never_claim_the_same_job(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    ids = {store.enqueue({}, idempotency_key=None, max_attempts=1)[0].id for _ in range(60)}
    ctx = multiprocessing.get_context("fork")  # the test module is not importable by path in a spawned child
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(queue, out)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    flat = [i for g in got for i in g]
    assert len(flat) == len(set(flat)) == 60 and set(flat) == ids


def test_requeue_after_crash_then_give_up_after_max_attempts(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    job, _ = store.enqueue({}, idempotency_key=None, max_attempts=2)
    store.claim("dead-worker")
    assert store.requeue_stale(older_than_s=None) == [job.id]
    assert store.get(job.id).status == "queued"
    again = store.claim("w")
    assert again.attempts == 2
    assert store.requeue_stale(older_than_s=None) == []
    failed = store.get(job.id)
    assert failed.status == "failed" and failed.error["code"] == "worker_lost"


def test_requeue_by_heartbeat_age_leaves_live_claims(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    store.enqueue({}, idempotency_key=None, max_attempts=3)
    store.claim("w")
    assert store.requeue_stale(older_than_s=60) == []


def test_cancel_hides_job_and_stops_its_completion(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    job, _ = store.enqueue({}, idempotency_key=None, max_attempts=3)
    store.claim("w")
    assert store.cancel(job.id) is not None
    assert store.get(job.id) is None and store.is_cancelled(job.id)
    assert not store.complete(job.id, "w", output="x.mp4", timings={})
    assert store.cancel(job.id) is None


def test_list_pages_by_creation_order(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    ids = [store.enqueue({}, idempotency_key=None, max_attempts=1)[0].id for _ in range(5)]
    page, more = store.list(limit=2, order="asc")
    assert [j.id for j in page] == ids[:2] and more
    page, more = store.list(after=ids[1], limit=10, order="asc")
    assert [j.id for j in page] == ids[2:] and not more
    page, _ = store.list(limit=2, order="desc")
    assert [j.id for j in page] == ids[:-3:-1]


def test_completed_jobs_add_their_phase_seconds_and_deleting_takes_none_back(queue: str, tmp_path: Path) -> None:
    store = open_store(queue, tmp_path)
    ids = [store.enqueue({}, idempotency_key=None, max_attempts=1)[0].id for _ in range(3)]
    for seconds in (1.5, 2.5):
        job = store.claim("w")
        assert store.complete(job.id, "w", output="x.mp4", timings={"denoise": seconds, "decode": 0.5})
    store.claim("w")
    store.cancel(ids[0])
    store.purge(ids[0])
    assert store.phase_totals() == {"denoise": (4.0, 2), "decode": (1.0, 2)}
    assert store.counts() == {"completed": 1, "in_progress": 1}
