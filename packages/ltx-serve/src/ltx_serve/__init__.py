"""ltx-serve: the LTX-2 pipelines behind an OpenAI-style `/v1/videos` API."""
