"""`python -m reactgraph.graph.cli`: the same command line as `reactgraph`."""

from reactgraph.graph.cli.app import entry_point

if __name__ == "__main__":
    entry_point()
