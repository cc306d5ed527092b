"""dm-env environments and supervised data generators (NumPy + dm_env only)."""
