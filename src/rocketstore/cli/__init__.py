"""The `rocketstore` command line (see main.py)."""
