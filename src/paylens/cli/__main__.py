"""`python -m paylens.cli`: the `paylens` command."""

import sys

from paylens.cli import main

sys.exit(main())
