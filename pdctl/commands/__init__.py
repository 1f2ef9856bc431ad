"""pdctl's commands, one module per group; pdctl/cli.py assembles them into the app."""
