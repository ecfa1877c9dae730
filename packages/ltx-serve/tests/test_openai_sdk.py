"""The official `openai` SDK against `python -m ltx_serve --demo` on localhost (one CPU worker, 64x64, 9
frames): create, poll, download, list, delete, cancel while running; the bytes equal the CLI's."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import openai
import pytest
from serve_testing import get_text, playable_streams, start_server, stop_server, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")]

README = Path(__file__).parents[3] / "README.md"
README_URL = "http://127.0.0.1:8000"

SMALL = {"size": "64x64", "extra_body": {"num_frames": 9, "frame_rate": 25}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    process, url = start_server(root / "data", "--workers", "1", "--no-warmup")
    yield url, root / "data"
    stop_server(process)


@pytest.fixture
def client(server) -> openai.OpenAI:
    url, _ = server
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_create_poll_download_list_delete_and_same_bytes_as_cli(client, server, tmp_path: Path) -> None:
    _, data_dir = server
    video = client.videos.create_and_poll(prompt="a red fox", seconds="4", poll_interval_ms=300, timeout=300,
                                          extra_body={**SMALL["extra_body"], "seed": 11}, size="64x64")  # fmt: skip
    assert video.status == "completed" and video.progress == 100, video
    assert video.size == "64x64" and video.model == "ltx-2"
    out = tmp_path / "served.mp4"
    client.videos.download_content(video.id).write_to_file(out)
    assert playable_streams(out) == (9, 1)

    from ltx_pipelines.distilled import main as cli

    cli_out = tmp_path / "cli.mp4"
    argv = ["--demo", "--prompt", "a red fox", "--seed", "11", "--height", "64", "--width", "64",
            "--num-frames", "9", "--frame-rate", "25", "--output-path", str(cli_out)]  # fmt: skip
    assert cli(argv) == 0
    assert out.read_bytes() == cli_out.read_bytes()

    listed = client.videos.list(limit=10)
    assert video.id in [v.id for v in listed.data]
    assert client.videos.retrieve(video.id).status == "completed"
    deleted = client.videos.delete(video.id)
    assert deleted.deleted and deleted.id == video.id
    assert not list((data_dir / "outputs").glob(f"{video.id}*"))
    with pytest.raises(openai.NotFoundError):
        client.videos.retrieve(video.id)


def test_cancel_while_running_stops_the_job_and_removes_it(client, server) -> None:
    url, data_dir = server
    video = client.videos.create(prompt="a slow one", **SMALL)
    wait_for(lambda: client.videos.retrieve(video.id).status == "in_progress", timeout=120, every=0.1)
    client.videos.delete(video.id)
    with pytest.raises(openai.NotFoundError):
        client.videos.retrieve(video.id)
    # The worker is replaced and takes the next job: the queue keeps going.
    after = client.videos.create_and_poll(prompt="next", poll_interval_ms=300, timeout=300, **SMALL)
    assert after.status == "completed"
    assert not list((data_dir / "outputs").glob(f"{video.id}*"))
    events = get_text(f"{url}/v1/videos/{after.id}/events")
    assert "event: completed" in events and '"progress": 100' in events


def test_bad_request_is_openai_error(client) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.videos.create(prompt="a", size="720x1280", extra_body={"num_frames": 10})
    assert error.value.body["param"] in ("num_frames", "size")


def test_image_upload_conditions_the_job(client, server, tmp_path: Path) -> None:
    import json

    from PIL import Image

    _, data_dir = server
    image = tmp_path / "first.png"
    Image.new("RGB", (64, 64), (250, 20, 20)).save(image)
    with image.open("rb") as upload:
        video = client.videos.create_and_poll(prompt="from an image", input_reference=upload, poll_interval_ms=300,
                                              timeout=300, **SMALL)  # fmt: skip
    assert video.status == "completed", video.error
    sidecar = json.loads((data_dir / "outputs" / f"{video.id}.json").read_text())
    assert "uploads" in json.dumps(sidecar["parameters"].get("images")), sidecar["parameters"]


def readme_blocks(language: str) -> list[str]:
    """The `language` code blocks of the README's serving section, in order."""
    section = README.read_text().split("## Serving (OpenAI Videos API)", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_readme_examples_run_as_written(server, tmp_path: Path, monkeypatch) -> None:
    """The README's curl lines, run by bash one after the other (its `ID=video_...` line stands for the id
    the first answered), then its Python, against this server (only the address is changed)."""
    url, _ = server
    start, calls = readme_blocks("bash")
    assert "python -m ltx_serve --demo" in start  # the fixture's command, with a free port and a temp folder
    commands = [line.replace(README_URL, url) for line in calls.replace("\\\n", " ").splitlines() if line.strip()]
    create, id_line, *rest = commands
    assert id_line.startswith("ID=video_")

    def bash(command: str, **env: str) -> str:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env={**os.environ, **env}, capture_output=True)
        assert done.returncode == 0, (command, done.stderr)
        return done.stdout.decode()

    video_id = json.loads(bash(create))["id"]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    wait_for(lambda: client.videos.retrieve(video_id).status == "completed", timeout=300)
    status, events, downloaded, deleted = (bash(command, ID=video_id) for command in rest)
    assert json.loads(status)["status"] == "completed" and "event: completed" in events and downloaded == ""
    assert playable_streams(tmp_path / "fox.mp4") == (9, 1)
    assert json.loads(deleted) == {"id": video_id, "object": "video.deleted", "deleted": True}

    (python,) = readme_blocks("python")
    (tmp_path / "sdk").mkdir()
    monkeypatch.chdir(tmp_path / "sdk")
    exec(compile(python.replace(README_URL, url), "README.md", "exec"), {})
    assert playable_streams(tmp_path / "sdk" / "fox.mp4") == (9, 1)
