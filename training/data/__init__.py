"""The data of a run: the embedded corpora and the pinned wheels' catalogs, the user's files or Hub dataset and the
errors of a bad corpus, the hash splits, the run's tokenizer, the markup augmentation and the batches."""
