"""examples/quickstart.ipynb runs top to bottom on the demo weights and writes its mp4."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

NOTEBOOK = Path(__file__).resolve().parents[4] / "examples" / "quickstart.ipynb"


@pytest.mark.slow
def test_quickstart_notebook_runs_and_writes_a_video(tmp_path, monkeypatch):
    import nbclient
    import nbformat

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the kernel inherits it
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    with av.open(str(tmp_path / "fox.mp4")) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames == 17
    assert (tmp_path / "fox.json").is_file()
    outputs = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert "(17, 128, 192, 3)" in str(outputs[1].outputs)  # frames_array's shape
    shown = [o for o in outputs[3].outputs if o.get("output_type") == "execute_result"]
    assert shown and "image/png" in shown[0]["data"]  # the middle frame is displayed as a picture
