"""The worlds context: worlds, their rule corpus, and the World Agent's memory rules."""
