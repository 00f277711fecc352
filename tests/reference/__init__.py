"""Naive reference implementations, written from the papers' formulas with explicit Python loops.

They never import `hf_attention`: the unit tests compare the library against them, so a mistake in the library
cannot hide in its own reference.
"""
