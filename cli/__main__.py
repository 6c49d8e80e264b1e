"""`python -m guardtrace.cli`: the same as the `guardtrace` command."""

import sys

from .main import main

sys.exit(main())
