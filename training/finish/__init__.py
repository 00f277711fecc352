"""The end of a run: the final evaluation and its scores, the exported folder with its model card and plots, and the
upload."""
