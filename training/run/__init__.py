"""The run itself: what it holds once set up, the model it builds, the loop, its loss, weight averaging, crash-safe
checkpoints with exact resume, the metrics log, and FSDP on CPUs."""
