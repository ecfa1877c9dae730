"""A pipeline resolves its checkpoint into one set of model files when it is built (issue 34): the engine's
helpers given that set answer from it without reading a header again, and run records still name the path."""

from __future__ import annotations

from ltx_core.loader import ModelFiles
from ltx_pipelines.engine.generation import describe_model_files
from ltx_pipelines.engine.model_loading import detect_checkpoint_kind, video_decoder_spec_of
from ltx_pipelines.engine.model_versions import checkpoint_model_version, defaults_for_checkpoint
from ltx_pipelines.engine.prompt_pipeline import Pipeline, check_length_request, has_duration_head
from ltx_pipelines.engine.requests import keyframe_embedding_problem


def test_the_helpers_answer_from_the_pipelines_set_without_reading_again(model_files, header_reads):
    counts = header_reads
    pipeline = Pipeline(model_files.checkpoint_v24, device="cpu")
    assert counts == {model_files.checkpoint_v24.name: 1}
    files = pipeline.checkpoint_path
    assert isinstance(files, ModelFiles) and files.given == model_files.checkpoint_v24
    assert pipeline.checkpoint is files.info and pipeline.checkpoint.model_version == (2, 4)
    for _ in range(2):
        assert checkpoint_model_version(files) == (2, 4)
        assert defaults_for_checkpoint(files).image_crf == 18  # LTX-2.4's
        assert not has_duration_head(files)
        assert "lacks use_keyframes_abs_pos_embedding" in (keyframe_embedding_problem(files) or "")
        assert video_decoder_spec_of(files).name == "video VAE decoder"
        assert detect_checkpoint_kind(files).kind == "ltx_checkpoint"
        check_length_request(files, 9, None)
    assert counts == {model_files.checkpoint_v24.name: 1}


def test_run_records_name_the_path_the_pipeline_was_given(model_files):
    pipeline = Pipeline(str(model_files.checkpoint), device="cpu")
    recorded = describe_model_files({"checkpoint": pipeline.checkpoint_path})["checkpoint"]
    assert recorded == describe_model_files({"checkpoint": model_files.checkpoint})["checkpoint"]
    assert recorded is not None and recorded["path"] == str(model_files.checkpoint)
    # A set the caller built is recorded as a set.
    built = ModelFiles.single_file(model_files.checkpoint)
    assert describe_model_files({"checkpoint": Pipeline(built, device="cpu").checkpoint_path})["checkpoint"] == (
        built.as_dict()
    )
