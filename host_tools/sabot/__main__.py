"""`python -m sabot`: the sabot command line."""

import sys

from sabot.cli import main

sys.exit(main())
