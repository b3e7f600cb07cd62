"""`python -m pytest_gemmguard.github ...`: see the package docstring."""

import sys

from .cli import main

sys.exit(main())
