"""The core of Sursis: tool contract, errors, state machines and ports. Standard library only."""
