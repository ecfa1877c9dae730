"""The library layer of the pipelines: model lifecycle, denoising stages, prompt encoding, noise
sources and the Generation value. Nothing here knows about argparse (that is `ltx_pipelines.cli`)."""
