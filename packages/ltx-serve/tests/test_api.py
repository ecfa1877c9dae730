"""The HTTP API without workers: request checks (the bad-input catalogue of docs/serving.md), the OpenAI
shapes, idempotency, back-pressure, the API key. Nothing here runs a model."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from ltx_serve.api import ApiConfig, create_app
from ltx_serve.requests import Limits
from ltx_serve.store import SqliteJobStore

LIMITS = Limits(
    max_width=256,
    max_height=256,
    max_frames=33,
    max_seconds=2.0,
    max_prompt_chars=50,
    max_body_bytes=4096,
    default_size="64x64",
    default_seconds="0.36",
    loras={"style": "/models/style.safetensors"},
)


def png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def api(tmp_path: Path) -> tuple[TestClient, SqliteJobStore]:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    app = create_app(ApiConfig(store=store, data_dir=tmp_path, limits=LIMITS, max_queued=3))
    return TestClient(app), store


# The bad-input catalogue: (what, JSON body, status, param). docs/serving.md shows the same table.
BAD_INPUT = [
    ("no prompt", {}, 400, "prompt"),
    ("empty prompt", {"prompt": "  "}, 400, "prompt"),
    ("prompt too long", {"prompt": "x" * 51}, 400, "prompt"),
    ("size not WxH", {"prompt": "a", "size": "big"}, 400, "size"),
    ("size not a multiple of 64", {"prompt": "a", "size": "100x64"}, 400, "size"),
    ("size over the limit", {"prompt": "a", "size": "512x64"}, 400, "size"),
    ("frames not 8k+1", {"prompt": "a", "num_frames": 10}, 400, "num_frames"),
    ("frames over the limit", {"prompt": "a", "num_frames": 41}, 400, "num_frames"),
    ("seconds over the limit", {"prompt": "a", "seconds": "12"}, 400, "seconds"),
    ("seconds not a number", {"prompt": "a", "seconds": "four"}, 400, "seconds"),
    ("duration over the limit", {"prompt": "a", "num_frames": 33, "frame_rate": 8}, 400, "seconds"),
    ("frame rate out of range", {"prompt": "a", "frame_rate": 0.5}, 400, "frame_rate"),
    ("seed not an integer", {"prompt": "a", "seed": "x"}, 400, "seed"),
    ("negative seed", {"prompt": "a", "seed": -1}, 400, "seed"),
    ("unknown pipeline", {"prompt": "a", "pipeline": "sora"}, 400, "pipeline"),
    ("negative prompt on distilled", {"prompt": "a", "negative_prompt": "blur"}, 400, "negative_prompt"),
    ("unknown LoRA", {"prompt": "a", "loras": {"other": 0.5}}, 400, "loras"),
    ("LoRA strength not a number", {"prompt": "a", "loras": {"style": "strong"}}, 400, "loras.style"),
    ("image not base64 data URL", {"prompt": "a", "input_reference": {"image_url": "http://x/y.png"}}, 400,
     "input_reference"),
    ("bad image bytes", {"prompt": "a", "input_reference": {"image_url": "data:image/png;base64,"
                                                             + base64.b64encode(b"notanimage").decode()}}, 400,
     "input_reference"),
    ("image frame out of range", {"prompt": "a", "image_frame_idx": 9, "input_reference": {
        "image_url": "data:image/png;base64," + base64.b64encode(png_bytes()).decode()}}, 400, "image_frame_idx"),
    ("body over the limit", {"prompt": "a" * 5000}, 413, None),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body", "status", "param"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_gets_one_clear_error_and_queues_nothing(api, what, body, status, param) -> None:
    client, store = api
    response = client.post("/v1/videos", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["message"]
    assert store.counts() == {}


def test_invalid_json_body(api) -> None:
    client, store = api
    response = client.post("/v1/videos", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "JSON" in response.json()["error"]["message"]
    assert store.counts() == {}


def test_create_returns_openai_video_object_and_defaults(api) -> None:
    client, store = api
    response = client.post("/v1/videos", json={"prompt": "a cat", "seed": 5})
    assert response.status_code == 200, response.text
    video = response.json()
    assert video["object"] == "video" and video["status"] == "queued" and video["progress"] == 0
    assert video["size"] == "64x64" and video["num_frames"] == 9 and video["seed"] == 5
    assert video["loras"] == {"style": 1.0}
    assert store.get(video["id"]).request["prompt"] == "a cat"
    assert client.get(f"/v1/videos/{video['id']}").json()["id"] == video["id"]


def test_multipart_with_uploaded_image_is_saved_for_the_worker(api, tmp_path: Path) -> None:
    client, store = api
    response = client.post(
        "/v1/videos",
        data={"prompt": "a cat", "size": "128x64", "seconds": "1", "loras": '{"style": 0.5}'},
        files={"input_reference": ("first.png", png_bytes(), "image/png")},
    )
    assert response.status_code == 200, response.text
    request = store.get(response.json()["id"]).request
    assert (request["width"], request["height"], request["num_frames"]) == (128, 64, 25)
    assert request["loras"] == [{"path": "/models/style.safetensors", "strength": 0.5, "name": "style"}]
    (image,) = request["images"]
    assert Path(image["path"]).read_bytes() == png_bytes() and image["frame_idx"] == 0


def test_bad_uploaded_image_is_refused(api) -> None:
    client, store = api
    response = client.post(
        "/v1/videos", data={"prompt": "a"}, files={"input_reference": ("x.png", b"\x89PNG garbage", "image/png")}
    )
    assert response.status_code == 400 and response.json()["error"]["param"] == "input_reference"
    assert store.counts() == {}


def test_idempotency_key_returns_the_same_job(api) -> None:
    client, store = api
    first = client.post("/v1/videos", json={"prompt": "a"}, headers={"Idempotency-Key": "k"}).json()
    again = client.post("/v1/videos", json={"prompt": "a"}, headers={"Idempotency-Key": "k"}).json()
    assert first["id"] == again["id"] and store.counts() == {"queued": 1}


def test_full_queue_gets_429_with_retry_after(api) -> None:
    client, store = api
    for _ in range(3):
        assert client.post("/v1/videos", json={"prompt": "a"}).status_code == 200
    response = client.post("/v1/videos", json={"prompt": "a"})
    assert response.status_code == 429 and response.headers["retry-after"].isdigit()
    assert response.json()["error"]["code"] == "queue_full" and store.counts() == {"queued": 3}


def test_list_pages_and_delete(api) -> None:
    client, _ = api
    ids = [client.post("/v1/videos", json={"prompt": f"p{i}"}).json()["id"] for i in range(3)]
    page = client.get("/v1/videos", params={"limit": 2, "order": "asc"}).json()
    assert page["object"] == "list" and [v["id"] for v in page["data"]] == ids[:2] and page["has_more"]
    rest = client.get("/v1/videos", params={"after": page["last_id"], "order": "asc"}).json()
    assert [v["id"] for v in rest["data"]] == ids[2:] and not rest["has_more"]
    deleted = client.delete(f"/v1/videos/{ids[0]}").json()
    assert deleted == {"id": ids[0], "object": "video.deleted", "deleted": True}
    assert client.get(f"/v1/videos/{ids[0]}").status_code == 404
    assert client.delete(f"/v1/videos/{ids[0]}").status_code == 404
    assert client.get("/v1/videos", params={"limit": 0}).status_code == 400


def test_content_of_unfinished_job_is_409(api) -> None:
    client, _ = api
    video = client.post("/v1/videos", json={"prompt": "a"}).json()
    response = client.get(f"/v1/videos/{video['id']}/content")
    assert response.status_code == 409 and response.json()["error"]["code"] == "video_not_ready"


def test_api_key_is_required_everywhere_but_health(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    client = TestClient(create_app(ApiConfig(store=store, data_dir=tmp_path, limits=LIMITS, api_key="s3cret")))
    assert client.get("/health").status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
        response = client.post("/v1/videos", json={"prompt": "a"}, headers=headers)
        assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
        assert client.get("/v1/videos", headers=headers).status_code == 401
    ok = client.post("/v1/videos", json={"prompt": "a"}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and store.counts() == {"queued": 1}


def test_metrics_report_queue_depth_and_refusals(api) -> None:
    client, _ = api
    client.post("/v1/videos", json={"prompt": "a"})
    client.post("/v1/videos", json={})
    text = client.get("/metrics").text
    assert "ltx_serve_queue_depth 1" in text
    assert 'ltx_serve_refused_requests_total{status="400"} 1' in text


class NoRowReads:
    """The store, but reading job rows fails the test: a scrape must not page through every job."""

    def __init__(self, store: SqliteJobStore) -> None:
        self.store = store

    def __getattr__(self, name: str):
        if name in ("list", "get"):
            raise AssertionError(f"/metrics read job rows ({name})")
        return getattr(self.store, name)


def test_metrics_come_from_counts_and_phase_totals_not_job_rows(api, tmp_path: Path) -> None:
    client, store = api
    ids = [client.post("/v1/videos", json={"prompt": "a"}).json()["id"] for _ in range(3)]
    for seconds in (1.5, 2.5):
        job = store.claim("w")
        store.complete(job.id, "w", output="x.mp4", timings={"prompt": 0.25, "denoise": seconds})
    client.delete(f"/v1/videos/{ids[0]}")  # a counter never goes back
    scraper = TestClient(create_app(ApiConfig(store=NoRowReads(store), data_dir=tmp_path, limits=LIMITS)))
    text = scraper.get("/metrics").text
    for line in (
        'ltx_serve_jobs{status="completed"} 1',
        "ltx_serve_queue_depth 1",
        'ltx_serve_phase_seconds_sum{phase="denoise"} 4.000',
        'ltx_serve_phase_seconds_count{phase="denoise"} 2',
        'ltx_serve_phase_seconds_sum{phase="prompt"} 0.500',
    ):
        assert line in text.splitlines(), (line, text)
    plan = store._db.execute("EXPLAIN QUERY PLAN SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
    assert "COVERING INDEX jobs_status_seq" in str(plan)  # the counts read the index, not the rows
