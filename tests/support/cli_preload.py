"""Imported by the forkserver of support.forked_commands (its PRELOAD): the CLI's click command is made there
once (≈ 30 ms of CPU), and every command forked from it finds it made, as it finds the modules imported."""

from reactgraph.cli.app import click_command

click_command()
