"""LTX-2 pipelines: each module is runnable with `python -m ltx_pipelines.<name>`."""
