"""Sursis as the approval authority of agents it does not host, one module per framework.

Each module imports its framework and `httpx`; `import sursis` imports none of them.
"""
