"""Running a model fast outside the shipped code: compiled static-cache generation, and whether the CPU at hand
multiplies bfloat16 natively."""
