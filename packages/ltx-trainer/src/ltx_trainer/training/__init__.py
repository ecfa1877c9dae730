"""Training: the recipe (`trainer`), building a run (`build`), one step (`step`), checkpoints (save, resume,
fingerprint), the flexible strategy, random draws, timestep samplers, LR schedules, LoRA files, validation,
reporting, the memory estimate and the demo run."""
