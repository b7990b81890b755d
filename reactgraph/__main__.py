"""`python -m reactgraph`: the same command line as `reactgraph`."""

from reactgraph.cli.app import entry_point

if __name__ == "__main__":
    entry_point()
