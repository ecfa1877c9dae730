"""The names a user may pick for how the transformer runs (no torch: command lines list and check them
before any model is imported). What each does is in `runtime` and `model.transformer.attention_backends`."""

QUANTIZATION_CHOICES = ("fp8-cast", "fp8-scaled-mm")
OFFLOAD_CHOICES = ("none", "cpu", "disk")
ACCEPTED_BACKEND_NAMES = ("auto", "sdpa", "flash3", "flash4", "mps-sdpa")
