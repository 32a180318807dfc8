"""`python -m mwp` runs the `mwp` command line."""

from mwp.cli import run

if __name__ == "__main__":
    run()
