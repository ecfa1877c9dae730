"""caption_videos against a local OpenAI-compatible server, the answer parser, and the request
builders of the Gemini and transformers captioners (no network)."""

from __future__ import annotations

import base64
import io
import json
import threading
import wave
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from ltx_trainer.caption_videos import app
from ltx_trainer.captioning import load_media_sample, parse_caption
from ltx_trainer.captioning.captions_file import caption_media
from ltx_trainer.captioning.gemini import build_gemini_request
from ltx_trainer.captioning.local_model import build_vlm_messages
from ltx_trainer.captioning.openai_compatible import OpenAICompatibleCaptioner
from ltx_trainer.preprocessing.media import find_media
from ltx_trainer.serve_captioner import app as serve_app


class FakeServer:
    """A chat-completions endpoint on 127.0.0.1 that records requests and answers from a script."""

    def __init__(self, answers):
        self.requests: list[dict] = []
        self.answers = answers
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                status, text = outer.answers(len(outer.requests), body)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def clips(tmp_path, make_clip):
    folder = tmp_path / "clips"
    for i in range(4):
        make_clip(folder / f"c{i}.mp4", frames=9, height=32, width=32, fps=8)
    return folder


def test_captions_through_a_local_server_incrementally_and_resumes(clips, tmp_path):
    def answers(n, body):
        if n == 3:
            return 500, "overloaded"
        if n == 2:  # a thinking model cut off mid-JSON
            return 200, '<think>square, red</think>{"combined_caption_english": "A square \\"moves\\" right'
        return 200, json.dumps({"combined_caption_english": f"caption {n}"})

    out = tmp_path / "dataset.jsonl"
    with FakeServer(answers) as server:
        captioner = OpenAICompatibleCaptioner(base_url=server.url, model="omni", fps=4, retries=0)
        report = caption_media(find_media(clips, ["mp4"], False), out, captioner, save_every=1)
        first = server.requests[0]
        assert first["path"] == "/v1/chat/completions"
        body = first["body"]
        assert body["model"] == "omni" and body["temperature"] == 0.0
        parts = body["messages"][0]["content"]
        images = [p for p in parts if p["type"] == "image_url"]
        audios = [p for p in parts if p["type"] == "input_audio"]
        assert len(images) == 5  # 9 frames at 8 fps, sampled at 4 fps: t = 0, 0.25, ..., 1.0
        assert images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
        wav = base64.b64decode(audios[0]["input_audio"]["data"])
        with wave.open(io.BytesIO(wav)) as w:
            assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getnframes() > 16000

        rows = {r["media_path"]: r["caption"] for r in map(json.loads, out.read_text().splitlines())}
        assert rows == {
            "clips/c0.mp4": "caption 1",
            "clips/c1.mp4": 'A square "moves" right',
            "clips/c3.mp4": "caption 4",
        }
        assert [d.path for d in report.drops] == ["clips/c2.mp4"] and "500" in report.drops[0].reason

        # A rerun asks only for the missing caption and keeps the others.
        before = len(server.requests)
        again = caption_media(find_media(clips, ["mp4"], False), out, captioner)
        assert len(server.requests) == before + 1 and again.written == {"caption": 1}
        rows = {r["media_path"]: r["caption"] for r in map(json.loads, out.read_text().splitlines())}
        assert len(rows) == 4 and rows["clips/c2.mp4"] == "caption 5"


def test_an_interrupted_run_keeps_what_it_captioned(clips, tmp_path):
    class Dying:
        name = "dying"
        calls = 0

        def caption(self, media):
            self.calls += 1
            if self.calls == 3:
                raise KeyboardInterrupt
            return f"c{self.calls}"

    out = tmp_path / "out.json"
    with pytest.raises(KeyboardInterrupt):
        caption_media(find_media(clips, ["mp4"], False), out, Dying(), save_every=5)
    assert [r["caption"] for r in json.loads(out.read_text())] == ["c1", "c2"]


@pytest.mark.parametrize(
    ("answer", "caption"),
    [
        ('{"combined_caption_english": "A cat sleeps."}', "A cat sleeps."),
        ('<think>let me look</think>\n```json\n{"combined_caption_english": "Rain falls."}\n```', "Rain falls."),
        ('{"combined_caption_english": "A long caption that was cut', "A long caption that was cut"),
        ('{"combined_caption_english": "Ends in an escape \\', "Ends in an escape"),
        ("reasoning without an opening tag</think>Plain words.", "Plain words."),
        ("Just a sentence.", "Just a sentence."),
    ],
)
def test_parser_tolerates_thinking_fences_and_truncation(answer, caption):
    assert parse_caption(answer) == caption


def test_parser_rejects_an_empty_answer():
    with pytest.raises(ValueError, match="no caption"):
        parse_caption("<think>only thoughts</think>")


def test_gemini_and_local_requests_carry_the_media(clips):
    clip = clips / "c0.mp4"
    request = build_gemini_request(clip, model="gemini-x", instruction="Describe.", max_tokens=99)
    parts = request["contents"][0]["parts"]
    assert request["model"] == "gemini-x" and request["config"]["max_output_tokens"] == 99
    assert parts[0]["inline_data"] == {"mime_type": "video/mp4", "data": clip.read_bytes()}
    assert parts[1] == {"text": "Describe."}

    messages = build_vlm_messages(load_media_sample(clip, fps=2, with_audio=False), "Describe.")
    content = messages[0]["content"]
    assert [p["type"] for p in content] == ["image"] * 3 + ["text"]
    assert content[0]["image"].size == (32, 32)


def test_cli_errors_and_serve_command():
    runner = CliRunner()
    result = runner.invoke(app, ["/nonexistent/folder", "-c", "qwen_omni"])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = runner.invoke(app, [".", "-w", "3"])
    assert result.exit_code != 0 and "gemini_flash" in result.output
    result = runner.invoke(serve_app, ["--print-cmd", "--port", "9000", "-q", "bf16"])
    assert result.exit_code == 0
    assert "vllm serve Qwen/Qwen3-Omni-30B-A3B-Thinking" in result.output and "--port 9000" in result.output
    assert "--quantization" not in result.output


def test_every_caption_failing_exits_1_and_partial_success_exits_0(clips, tmp_path):
    out = tmp_path / "dataset.json"
    with FakeServer(lambda n, body: (400, "bad request")) as server:
        result = CliRunner().invoke(app, [str(clips), "-o", str(out), "--vllm-url", server.url])
    assert result.exit_code == 1, result.output
    assert "error: every caption failed or was dropped (4 of 4), nothing usable written" in result.output
    with FakeServer(lambda n, body: (400, "no") if n == 1 else (200, '{"combined_caption_english": "ok"}')) as server:
        result = CliRunner().invoke(app, [str(clips), "-o", str(out), "--vllm-url", server.url])
    assert result.exit_code == 0, result.output
