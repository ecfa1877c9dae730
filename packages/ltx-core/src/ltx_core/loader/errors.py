"""Errors raised while reading checkpoints and building models."""


class CheckpointError(ValueError):
    """A checkpoint file is missing, malformed, of the wrong kind, or does not fit the model."""
