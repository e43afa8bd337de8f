"""The core of Abeyance: tool contract, errors, state machines and ports. Standard library only."""
