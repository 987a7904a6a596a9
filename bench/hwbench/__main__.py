"""`python -m hwbench`: what bench/run.sh runs (main.py has the command line)."""

import sys

from .main import main

sys.exit(main())
