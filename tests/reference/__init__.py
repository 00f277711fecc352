"""Naive reference implementations, written from the papers' formulas with explicit Python loops.

They never import `hf_attention`: the unit tests compare the library against them (STYLE.md §5 rule 12 (i)).
"""
