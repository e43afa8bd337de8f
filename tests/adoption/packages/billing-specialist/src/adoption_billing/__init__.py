"""A billing agent, consulted by the built-in customer supervisor."""
