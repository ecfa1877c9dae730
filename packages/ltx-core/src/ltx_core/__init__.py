"""LTX-2 core: models, loaders and sampling components."""
