"""The `hf-attention` command (cli.py), its demo, and what the commands that write share: checkpoint paths checked
before loading, what a saved folder holds, where a command writes, and `refresh-code`."""
