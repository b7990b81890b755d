"""Imported last by the forkserver of support.forked_commands (its PRELOAD), to leave it ready to fork:

- the CLI's click command is made once (≈ 30 ms of CPU), and every command forked from it finds it made, as it
  finds the modules imported;
- then everything imported so far is moved out of the garbage collector's sight (`gc.freeze()`, as the gc
  module's documentation advises before forking). A forked command shares the forkserver's heap page by page
  until it writes to one; without this, its first full collection walked every object it inherited, writing to
  each one's header: it copied most of the heap and spent ≈ 0.15 s of CPU (of ≈ 0.3 s) before `reactgraph serve`
  answered. Frozen, those objects are never collected (the forkserver only forks; its modules live as long as it
  does) and stay shared."""

import gc

from reactgraph.cli.app import click_command

click_command()
gc.collect()
gc.freeze()
