import sys

from distagent.cli import main

sys.exit(main())
