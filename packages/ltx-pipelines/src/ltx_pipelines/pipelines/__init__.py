"""The pipeline classes, one module per pipeline; `ltx_pipelines.<name>` is its command line (light: it
imports its pipeline module only once the flags are checked) and re-exports these names."""
