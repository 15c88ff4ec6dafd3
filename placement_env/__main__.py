"""``python -m placement_env``: see :mod:`placement_env.cli`."""
import sys

from .cli import main

sys.exit(main())
