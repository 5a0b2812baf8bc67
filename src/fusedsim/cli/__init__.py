"""Command-line interface: ``fusedsim <command>``."""
