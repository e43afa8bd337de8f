"""The `sursis` command line: `main` parses and dispatches (`commands.py`); each command group lives in
a module of its own (`keys`, `pending`, `encryption`, `retention`, `policy`, `groups`, `mcp`,
`conversations`, `login`) and `http` holds what the commands that talk to a running API share.
`python -m sursis.app.cli` runs it as the `sursis` script does."""

from sursis.app.cli.commands import main, parser, run

__all__ = ["main", "parser", "run"]
