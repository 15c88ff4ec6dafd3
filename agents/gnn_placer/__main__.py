"""``python -m agents.gnn_placer`` (see :mod:`.cli`)."""
import sys

from .cli import main

sys.exit(main())
