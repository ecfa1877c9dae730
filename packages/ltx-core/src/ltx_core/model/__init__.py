"""Model architectures (transformer, VAEs, vocoder, upsamplers), each in its own subpackage."""
