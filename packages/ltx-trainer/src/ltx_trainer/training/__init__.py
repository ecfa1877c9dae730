"""Training: random draws, timestep samplers, the flexible strategy, LR schedules, the loop, LoRA files."""
