"""`python -m mprig.cli`: the `mprig` command."""

import sys

from mprig.cli.main import main

sys.exit(main())
