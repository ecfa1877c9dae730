"""Model-independent helpers shared by the pipelines: CLI arguments, media I/O, hf:// paths, progress."""
