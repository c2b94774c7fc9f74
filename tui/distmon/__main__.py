import sys

from distmon.cli import main

sys.exit(main())
