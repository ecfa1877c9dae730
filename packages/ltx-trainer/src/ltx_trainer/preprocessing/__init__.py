"""Dataset preparation: captions, video and audio latents, reference latents, masks, and the `.precomputed/` files."""
