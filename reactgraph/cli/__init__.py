"""The `reactgraph` command line: the top layer, above the graphs and the evals."""
