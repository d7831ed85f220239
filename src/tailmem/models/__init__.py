"""Models and the role vocabulary that optimiser recipes are written in."""
