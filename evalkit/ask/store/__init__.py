"""Where answers are kept between requests and runs: the response cache (its entries sealed to their keys,
written in groups, verified) and the run directory's journal of answers received."""
