"""The Groups page: a step's groups, their math, ordering, ratings, rescores and tool turns."""
