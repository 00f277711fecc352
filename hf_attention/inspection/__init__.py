"""Seeing attention: what a map shows (attention_maps.py), heatmaps (heatmaps.py, `hf-attention attention-map`) and
every layer and head in one page (explorer.py, `hf-attention explore`)."""
