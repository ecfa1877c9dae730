"""The command-line layer: flag groups, validation before any model loads, hf:// resolution and the
parse -> pipeline -> write flow every `python -m ltx_pipelines.<name>` shares."""
