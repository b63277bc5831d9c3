"""`python -m bench.e2e`: the suite's driver is bench/e2e/main.py (its docstring has the
commands); kept out of this file so that other modules can import `main`."""

import os
import sys

from bench.e2e.main import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
sys.exit(main())
