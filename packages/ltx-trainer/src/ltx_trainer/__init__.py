"""LTX-2 trainer: dataset preparation and LoRA training."""
