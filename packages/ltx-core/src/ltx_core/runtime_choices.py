"""The names a user may pick for how the transformer and the text encoder run (no torch: command lines list
and check them before any model is imported). What each does is in `runtime`,
`model.transformer.attention_backends` and `text_encoders.gemma.modes`."""

QUANTIZATION_CHOICES = ("fp8-cast", "fp8-scaled-mm")
OFFLOAD_CHOICES = ("none", "cpu", "disk")
ACCEPTED_BACKEND_NAMES = ("auto", "sdpa", "flash3", "flash4", "mps-sdpa")
TEXT_ENCODER_MODES = ("full", "fp8", "stream-ram", "stream-disk")
