"""Text from outside made ours: lone surrogates replaced, and what is echoed to a terminal escaped and capped."""
