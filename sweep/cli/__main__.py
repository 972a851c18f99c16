"""`python -m sweep.cli`: the same CLI as the `sweep` command."""

import sys

from sweep.cli import main

sys.exit(main())
