"""Measurements and checks that are not library code; run them from the repository root as python -m experiments.<name>."""
