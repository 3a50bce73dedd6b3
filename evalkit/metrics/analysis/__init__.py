"""Statistics over finished runs: score tables, confidence intervals, paired tests, correlations."""
