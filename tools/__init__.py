"""Repository tooling (not part of the package): `python -m tools.<name>`."""
