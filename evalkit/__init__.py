"""evalkit: a lightweight async evaluator for hosted vision-language models."""

__version__ = "0.1.0"
