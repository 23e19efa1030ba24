# Developer commands. On a fresh machine `make demo` and `make test` are all you need: they
# create .venv, install missing system packages and the project itself (once; again only when
# pyproject.toml changes), then do their job. `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# ---------------------------------------------------------------- settings (override on the command line)
VENV ?= .venv
# The interpreter the venv is built from: python3.11, else python3 if it is 3.11 or newer.
PYTHON ?= $(shell for p in python3.11 python3; do \
	  $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$p; break; }; \
	done)
# Extras to install, and extra requirement specifiers (CI pins Django 6.1 this way).
EXTRAS ?= dev,postgres,mysql,realtime,redis
EXTRA_REQUIREMENTS ?=

# `make test`: also run on these databases (space-separated django-environ URLs), e.g.
#   make test DATABASE_URLS="postgres://postgres@127.0.0.1:5432/solid_alice mysql://root@127.0.0.1:3306/solid_alice"
# (a database name of your own per checkout: each run creates and drops test_<name>).
DATABASE_URLS ?=
# Extra pytest arguments, e.g. PYTEST_ARGS="-x -k cart".
PYTEST_ARGS ?=
# 1: the runs go in parallel (logs in .test-db/logs, summaries at the end); 0: one by one, live.
TEST_PARALLEL ?= 1
export DATABASE_URLS PYTEST_ARGS TEST_PARALLEL

DEMO_HOST ?= 127.0.0.1
DEMO_PORT ?= 8000
BENCH_ARGS ?=

PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MANAGE := $(PY) example_project/manage.py
INSTALL_SPEC := $(strip .[$(EXTRAS)] $(EXTRA_REQUIREMENTS))

# Reinstall when pyproject.toml is newer than the stamp, or the stamp records other extras.
ifneq ($(strip $(shell cat $(STAMP) 2>/dev/null)),$(strip $(INSTALL_SPEC)))
.PHONY: $(STAMP)
endif

.PHONY: help venv sysdeps browser-sysdeps test test-adversarial test-browser demo lint typecheck format bench bench-peers docs docs-serve dist tox clean

help:
	@echo "make demo    run the example shop (web server + workers) on http://$(DEMO_HOST):$(DEMO_PORT)/"
	@echo "make test    the test suite on SQLite and on every URL in DATABASE_URLS"
	@echo "make test-adversarial  the SIGKILL soak, database-restart and partition suites (same URLs)"
	@echo "make test-browser  the live-pages tests in headless Chromium (same URLs)"
	@echo "make lint    ruff check + ruff format --check"
	@echo "make typecheck  mypy --strict with django-stubs on solid_objects and tilttek_activity"
	@echo "make format  ruff format + ruff check --fix"
	@echo "make bench   python -m bench (on DATABASE_URL)"
	@echo "make bench-peers  the same workloads against procrastinate, dj-queue, the Node sibling"
	@echo "make docs    build the documentation site strictly into site/ (docs-serve: serve it)"
	@echo "make dist    build the sdist and the wheel into dist/ and check them (twine --strict)"
	@echo "make venv    create $(VENV) and install the project with extras [$(EXTRAS)]"
	@echo "make tox     the tox matrix (Django 5.2/6.1 x sqlite/postgres/mariadb)"
	@echo "make clean   remove $(VENV), test databases and logs"

# ---------------------------------------------------------------- environment
venv: $(STAMP)

$(PY):
	@if [ -z "$(PYTHON)" ]; then \
	  echo "error: Python 3.11 or newer is needed (python3.11 or python3 on PATH, or PYTHON=...)" >&2; exit 1; \
	fi
	@echo "==> creating $(VENV) with $$($(PYTHON) -c 'import sys; print(sys.executable, sys.version.split()[0])')"
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "error: '$(PYTHON) -m venv' failed; on Debian install python3-venv" >&2; exit 1; }

$(STAMP): pyproject.toml | $(PY)
	@$(MAKE) sysdeps
	@echo "==> installing $(INSTALL_SPEC) into $(VENV) (a minute or two on a fresh machine)"
	@# (the filter drops pip's notes about this machine's absent local package folders)
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]" $(foreach r,$(EXTRA_REQUIREMENTS),'$(r)') 2>&1 \
	  | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
	@echo '$(INSTALL_SPEC)' > $@

# mysqlclient has no Linux wheels: it compiles against libmariadb found through pkg-config.
# The test targets ask for two tools (NEED_TEST_TOOLS=1): spin model-checks the protocol
# (tests/model), and pgbouncer stands in front of PostgreSQL in transaction-pooling mode
# (tests/pooling; Debian installs it in /usr/sbin, off some users' PATH). The partition test
# puts workers in network namespaces with iproute2's `ip` (NEED_NETNS=1).
NEED_TEST_TOOLS ?=
NEED_NETNS ?=
SYSTEM_PACKAGES := libmariadb-dev pkg-config $(if $(NEED_TEST_TOOLS),spin pgbouncer) \
	$(if $(NEED_NETNS),iproute2)
sysdeps:
	@need=""; \
	if [ -n "$(NEED_TEST_TOOLS)" ] && ! command -v spin >/dev/null 2>&1; then need=1; fi; \
	if [ -n "$(NEED_TEST_TOOLS)" ] && ! command -v pgbouncer >/dev/null 2>&1 && \
	   [ ! -x /usr/sbin/pgbouncer ]; then need=1; fi; \
	if [ -n "$(NEED_NETNS)" ] && ! command -v ip >/dev/null 2>&1; then need=1; fi; \
	case ",$(EXTRAS)," in *,mysql,*) \
	  if ! { [ -x "$(PY)" ] && $(PY) -c 'import MySQLdb' >/dev/null 2>&1; } && \
	     ! { command -v pkg-config >/dev/null 2>&1 && \
	         { pkg-config --exists libmariadb || pkg-config --exists mariadb || pkg-config --exists mysqlclient; }; }; then \
	    need=1; fi ;; \
	esac; \
	[ -n "$$need" ] || exit 0; \
	echo "==> the build and the tests need system packages: $(SYSTEM_PACKAGES)"; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  .ci/apt-install $(SYSTEM_PACKAGES); \
	else \
	  echo "Run this once, then run make again:" >&2; \
	  echo "    sudo apt-get update && sudo apt-get install -y $(SYSTEM_PACKAGES)" >&2; \
	  echo "(or do without MySQL: add EXTRAS=dev,postgres,realtime,redis to the make command)" >&2; \
	  exit 1; \
	fi

# ---------------------------------------------------------------- everyday targets
test: $(STAMP)
	@$(MAKE) sysdeps NEED_TEST_TOOLS=1
	@.ci/test-matrix $(PY)

# The slow adversarial suites (SIGKILL soak, private database servers restarted under load, a
# worker's network link cut mid-turn), deselected from `make test`; one run after another by
# default (they load both cores). The partition test needs root (network namespaces).
ADVERSARIAL_MARKERS ?= soak or restart or partition
test-adversarial: $(STAMP)
	@$(MAKE) sysdeps NEED_TEST_TOOLS=1 NEED_NETNS=1
	@PYTEST_ARGS="-m '$(ADVERSARIAL_MARKERS)' $(PYTEST_ARGS)" TEST_PARALLEL=$${ADVERSARIAL_PARALLEL:-0} \
	  .ci/test-matrix $(PY)

# The live-pages tests drive Debian's headless Chromium through its chromedriver (selenium),
# against a real ASGI server and a real worker; deselected from `make test`.
BROWSER_PACKAGES := chromium chromium-driver
browser-sysdeps:
	@if command -v chromedriver >/dev/null 2>&1 && { command -v chromium >/dev/null 2>&1 || \
	    command -v chromium-browser >/dev/null 2>&1; }; then exit 0; fi; \
	echo "==> the browser tests need system packages: $(BROWSER_PACKAGES)"; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  .ci/apt-install $(BROWSER_PACKAGES); \
	else \
	  echo "Run this once, then run make again:" >&2; \
	  echo "    sudo apt-get update && sudo apt-get install -y $(BROWSER_PACKAGES)" >&2; \
	  exit 1; \
	fi

test-browser: $(STAMP)
	@$(MAKE) browser-sysdeps
	@PYTEST_ARGS="-m browser tests/browser $(PYTEST_ARGS)" TEST_PARALLEL=$${BROWSER_PARALLEL:-0} \
	  .ci/test-matrix $(PY)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	@for f in .ci/run .ci/test-matrix; do bash -n $$f; done

# Configured in pyproject.toml ([tool.mypy], [tool.django-stubs]); any error fails.
typecheck: $(STAMP)
	$(PY) -m mypy

format: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: $(STAMP)
	@test -f bench/__main__.py || { echo "bench: the benchmark package (bench/__main__.py) is not there yet" >&2; exit 1; }
	$(PY) -m bench $(BENCH_ARGS)

# The project beside its peers (procrastinate, dj-queue, the solid-objects Node package), each
# installed from its registry into .bench-peers/ (git-ignored), alternated in one run.
bench-peers: $(STAMP)
	$(PY) -m bench.peers $(BENCH_PEERS_ARGS)

# The documentation site (mkdocs.yml): --strict makes every warning, such as a link to a missing
# page or anchor, an error. The test suite runs the same build (tests/release/test_docs_site.py).
DOCS_PORT ?= 8001
export NO_MKDOCS_2_WARNING := 1
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	$(VENV)/bin/mkdocs serve --strict --dev-addr $(DEMO_HOST):$(DOCS_PORT)

# The release artifacts, built in isolation as an index user's pip would (docs/releasing.md).
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

# The example shop: migrate its database (SQLite in example_project/ unless DATABASE_URL says
# otherwise), make sure the demo admin exists, then run the web server and the workers together.
demo: export DJANGO_DEBUG ?= 1
demo: $(STAMP)
	$(MANAGE) migrate --noinput
	$(MANAGE) demo_setup
	@# The worker (`run_actor_worker --all-roles`) and the projection follower (`activity_catch_up
	@# --follow`) arrive with the two apps' runtimes. Each starts only once `manage.py help <command>`
	@# succeeds; until then the demo runs without it and says so.
	@flags=""; \
	 for pair in run_actor_worker:worker activity_catch_up:catch-up; do \
	   command=$${pair%%:*}; flag=$${pair#*:}; \
	   if $(MANAGE) help $$command >/dev/null 2>&1; then flags="$$flags --$$flag"; \
	   else flags="$$flags --no-$$flag"; echo "note: manage.py $$command is not available yet; the demo runs without it"; fi; \
	 done; \
	 exec $(PY) example_project/run_demo.py --host $(DEMO_HOST) --port $(DEMO_PORT) $$flags

# tox wants python3.11 and python3.12; pyenv's shims only answer for its selected versions, so
# point tox at the installed interpreters directly when the shims do not answer.
tox: $(STAMP)
	@for v in 3.11 3.12; do \
	  var=TOX_PY$${v/./}; [ -n "$${!var:-}" ] && continue; \
	  for c in python$$v $$(pyenv root 2>/dev/null || echo ~/.pyenv)/versions/$$v.*/bin/python$$v; do \
	    if $$c -c '' >/dev/null 2>&1; then export $$var=$$c; break; fi; \
	  done; \
	done; \
	$(VENV)/bin/tox $(TOX_ARGS)

clean:
	rm -rf $(VENV) .venv-dj61 .tox .test-db .bench-results build dist site *.egg-info
