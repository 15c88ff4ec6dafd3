"""``python -m agents.reinforce_seq2seq``: the command line of :mod:`agents.reinforce_seq2seq.cli`."""
import sys

from agents.reinforce_seq2seq.cli import main

sys.exit(main())
