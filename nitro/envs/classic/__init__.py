"""Gymnasium's classic-control envs, batched on the device, one module each."""
