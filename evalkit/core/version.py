"""evalkit's version, at the bottom of the layers so any module may record it (summary.json does).

`evalkit.__version__` re-exports it; pyproject.toml states the same string for packaging.
"""

__version__ = "0.1.0"
