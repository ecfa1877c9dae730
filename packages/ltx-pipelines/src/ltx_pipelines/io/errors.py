"""The error raised for media a pipeline cannot use."""


class MediaError(ValueError):
    """A media file is missing, unreadable, of the wrong kind, or has an unusable shape."""
