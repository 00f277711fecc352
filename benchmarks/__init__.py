"""Side-by-side speed and memory benchmarks of hf_attention against the Hugging Face reference models.

`python -m benchmarks.run [--quick] [--device cpu|cuda] [--out DIR]`; see `benchmarks/run.py`.
"""
