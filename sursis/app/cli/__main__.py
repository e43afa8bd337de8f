"""`python -m sursis.app.cli`: the `sursis` command."""

import sys

from sursis.app.cli.commands import main

sys.exit(main())
