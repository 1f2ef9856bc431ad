"""pdctl: plan an eks-pd-llm stack offline, then operate its endpoint (`python -m pdctl --help`)."""
