"""Media input/output with PyAV and Pillow: MP4/WAV writing, image conditioning, video/audio reading."""

from ltx_pipelines.io.errors import MediaError
from ltx_pipelines.io.image import load_image_conditioning, read_image_rgb, recompress_h264
from ltx_pipelines.io.readers import (
    AudioClip,
    VideoClip,
    VideoInfo,
    check_decodes,
    frames_to_model_input,
    iter_video_frames,
    probe_video,
    read_audio,
    read_video,
)
from ltx_pipelines.io.resize import resize_cover_center_crop, to_model_range
from ltx_pipelines.io.video_writer import (
    DEFAULT_VIDEO_CRF,
    WrittenVideo,
    fps_fraction,
    write_audio,
    write_video,
)
from ltx_pipelines.io.yuv import rgb_to_yuv420p_bt709

__all__ = [
    "DEFAULT_VIDEO_CRF",
    "AudioClip",
    "MediaError",
    "VideoClip",
    "VideoInfo",
    "WrittenVideo",
    "check_decodes",
    "fps_fraction",
    "frames_to_model_input",
    "iter_video_frames",
    "load_image_conditioning",
    "probe_video",
    "read_audio",
    "read_image_rgb",
    "read_video",
    "recompress_h264",
    "resize_cover_center_crop",
    "rgb_to_yuv420p_bt709",
    "to_model_range",
    "write_audio",
    "write_video",
]
