"""Text encoders and the stages that turn their hidden states into transformer contexts."""
