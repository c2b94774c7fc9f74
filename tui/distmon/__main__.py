"""`python -m distmon`: the same entry point as the `distmon` script."""

import sys

from distmon.cli import main

sys.exit(main())
