"""Command-line tools: `warploom` (cli.py) and `warploom-opt` (opt.py)."""
