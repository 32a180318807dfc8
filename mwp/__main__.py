"""`python -m mwp` runs the `mwp` command line."""

import sys

from mwp.cli import main

if __name__ == "__main__":
    sys.exit(main())
