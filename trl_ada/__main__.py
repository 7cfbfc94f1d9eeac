"""`python -m trl_ada ...` is `trl-ada ...`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
