"""Media input/output with PyAV and Pillow: MP4/WAV writing, image conditioning, video/audio reading."""

from __future__ import annotations

from ltx_core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "MediaError": "ltx_pipelines.io.errors",
    "load_image_conditioning": "ltx_pipelines.io.image",
    "read_image_rgb": "ltx_pipelines.io.image",
    "recompress_h264": "ltx_pipelines.io.image",
    "AudioClip": "ltx_pipelines.io.readers",
    "VideoClip": "ltx_pipelines.io.readers",
    "VideoInfo": "ltx_pipelines.io.readers",
    "check_decodes": "ltx_pipelines.io.readers",
    "frames_to_model_input": "ltx_pipelines.io.readers",
    "iter_video_frames": "ltx_pipelines.io.readers",
    "probe_video": "ltx_pipelines.io.readers",
    "read_audio": "ltx_pipelines.io.readers",
    "read_video": "ltx_pipelines.io.readers",
    "resize_cover_center_crop": "ltx_pipelines.io.resize",
    "to_model_range": "ltx_pipelines.io.resize",
    "DEFAULT_VIDEO_CRF": "ltx_pipelines.io.video_writer",
    "WrittenVideo": "ltx_pipelines.io.video_writer",
    "fps_fraction": "ltx_pipelines.io.video_writer",
    "write_audio": "ltx_pipelines.io.video_writer",
    "write_video": "ltx_pipelines.io.video_writer",
    "rgb_to_yuv420p_bt709": "ltx_pipelines.io.video_writer",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
