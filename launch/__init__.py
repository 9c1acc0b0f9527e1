"""Launching ddg jobs: ``ddgrun`` (see launch/ddgrun.py and launch/README.md)."""
