"""`python -m trl_ada.cli ...` (what `accelerate launch -m trl_ada.cli ...` runs) is `trl-ada ...`."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
