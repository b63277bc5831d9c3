"""`python -m bench.core`: the suite's driver is bench/core/main.py (its docstring has the
commands); kept out of this file so that tests and other modules can import `main`."""

import sys

from bench.core.main import main

sys.exit(main())
