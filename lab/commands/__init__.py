"""The lab's commands, one module per group; lab/cli.py assembles them into `python -m lab`."""
