"""`python -m lab`: the lab's commands (lab/cli.py assembles them from lab/commands/)."""

import sys

from lab.cli import main

if __name__ == "__main__":
    sys.exit(main())
