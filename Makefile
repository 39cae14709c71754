# Trellis: two set-up commands on a fresh machine.
#   make run    virtualenv + core + every plugin, migrate, first admin, serve on 127.0.0.1:3000
#   make test   the same install plus test tools, then the whole suite on SQLite and PostgreSQL
#   make soak   the tests marked `soak` with their long budgets (TRELLIS_SOAK=1), on both databases
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PLUGINS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))
PYTEST_ARGS ?=
# Each database's pass runs on two pytest-xdist workers, a test file per worker (its module-scoped live
# server and browser stay in one process): the live-server, fault and browser tests mostly wait on other
# processes, so four workers on two cores finish sooner than two.
# Files with a test marked `long` go first, in collection order (trellis.testing.plugin): handed out last,
# by xdist's default reorder, they were the suite's tail.
XDIST ?= -n 2 --dist loadfile --no-loadscope-reorder
export FLASK_APP := wsgi
# A quiet install: -qq keeps pip's errors only, and setuptools' notice on every editable build (a
# UserWarning, ~10 lines per package) is not for users of this Makefile.
PIP_QUIET := PYTHONWARNINGS=ignore::UserWarning $(BIN)/pip install -qq

.PHONY: run test soak lint install install-test test-sqlite test-postgresql browser nginx node bench bench-deps openapi clean

# Installs are editable, so code changes need none: only a changed pyproject.toml/setup.cfg (dependencies,
# entry points) or a plugin added or removed does. A stamp file in the virtualenv records the last install
# and the plugins it covered; `make run` with nothing changed goes straight to starting the server
# instead of ~105 s of pip reinstalling everything on each start. The test install is a superset of the
# plain one, so it renews both stamps.
PACKAGE_FILES := $(wildcard pyproject.toml setup.cfg plugins/*/pyproject.toml plugins/*/setup.cfg)
STAMP      := $(VENV)/.trellis-installed
STAMP_TEST := $(VENV)/.trellis-installed-test
ifneq ($(shell cat $(STAMP) 2>/dev/null),$(PLUGINS))
.PHONY: $(STAMP)
endif
ifneq ($(shell cat $(STAMP_TEST) 2>/dev/null),$(PLUGINS))
.PHONY: $(STAMP_TEST)
endif

$(BIN)/python:
	@echo "==> creating the virtualenv $(VENV) and updating pip"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip

$(STAMP): $(BIN)/python $(PACKAGE_FILES)
	@echo "==> installing Trellis and its $(words $(PLUGINS)) modules (editable; about 2 minutes the first time)"
	@$(PIP_QUIET) -e . $(foreach p,$(PLUGINS),-e ./$(p))
	@echo "$(PLUGINS)" > $@

$(STAMP_TEST): $(BIN)/python $(PACKAGE_FILES)
	@echo "==> installing Trellis, its $(words $(PLUGINS)) modules and the test tools (editable; a few minutes the first time)"
	@$(PIP_QUIET) -e '.[test]' $(foreach p,$(PLUGINS),-e './$(p)[test]')
	@echo "$(PLUGINS)" > $@
	@echo "$(PLUGINS)" > $(STAMP)

install: $(STAMP)

install-test: $(STAMP_TEST)

# `flask trellis init` (migrate, first admin) builds the whole app once more before the server builds its
# own, which doubles the start. It runs when the database may need it: the first start, a migration added
# or changed, a new install, another TRELLIS_DATABASE_URL, or the SQLite file gone. A database replaced
# behind Trellis's back needs `rm $(INSTANCE)/.trellis-initialised` (or `flask trellis init`) once.
# The stamp lives in the instance folder (TRELLIS_INSTANCE_PATH, as Trellis reads it), created here: with
# the database URL and the secrets in the environment nothing else creates it. It holds a checksum of the
# URL, not the URL and its password. Any URL and folder name work: make reads the folder with its spaces
# escaped, the URL reaches the shell single-quoted, and the recipe names the folder through the variable.
space      := $(subst ,, )
INSTANCE   := $(subst $(space),\$(space),$(or $(TRELLIS_INSTANCE_PATH),instance))
INIT_STAMP := $(INSTANCE)/.trellis-initialised
INIT_KEY   := $(shell printf '%s' '$(subst ','\'',$(value TRELLIS_DATABASE_URL))' | cksum)
MIGRATIONS := $(wildcard src/trellis/migrations/versions/*.py plugins/*/trellis_*/migrations/versions/*.py)
ifneq ($(shell cat $(INIT_STAMP) 2>/dev/null),$(INIT_KEY))
.PHONY: $(INIT_STAMP)
endif
ifeq ($(value TRELLIS_DATABASE_URL)$(wildcard $(INSTANCE)/trellis.db),)
.PHONY: $(INIT_STAMP)
endif

$(INIT_STAMP): $(STAMP) $(MIGRATIONS)
	@echo "==> migrating the database and creating the first administrator (flask trellis init)"
	@$(BIN)/flask trellis init
	@folder="$${TRELLIS_INSTANCE_PATH:-instance}"; mkdir -p "$$folder" && echo "$(INIT_KEY)" > "$$folder/.trellis-initialised"

run: install $(INIT_STAMP)
	@echo "==> starting the server (python wsgi.py; Ctrl-C stops it)"
	@$(BIN)/python wsgi.py

# Headless Chromium for the browser tests (Debian package; Playwright drives it, no download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Debian's chromium package (needed by the browser tests)"; exit 1; fi; }

# Node and npm for the tests of the JavaScript clients and of the client SDK (clients/js; Debian packages).
node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	  else echo "install Node.js 18 or later and npm (needed by the JavaScript client tests)"; exit 1; fi; }

# nginx for the two-process test behind deploy/nginx.conf (Debian package; run as a child, never as a service).
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	  else echo "install Debian's nginx package (needed by the two-process test)"; exit 1; fi; }

# ruff: lint and format are checked before any test runs (`ruff format .` mends the format); mypy: the types
# of the core and every module (pyproject.toml's [tool.mypy] says which files and how strictly).
lint: install-test
	@$(BIN)/ruff check --quiet . && $(BIN)/ruff format --check --quiet . && $(BIN)/mypy

# Both databases at once (two cores); each pass logs to its own file (.$(1)-sqlite.log …), shown when both
# are done; $(2): the environment and pytest arguments of both passes. The sources are compiled first:
# where PYTHONDONTWRITEBYTECODE is set (CI's machines), every process the tests start would compile them
# again (~0.5 s each).
define on_both_databases
	@rm -f .$(1)-sqlite.log .$(1)-postgresql.log; \
	$(BIN)/python -m compileall -q -j 0 src plugins wsgi.py > /dev/null; \
	TRELLIS_TEST_DB=sqlite $(2) > .$(1)-sqlite.log 2>&1 & sqlite=$$!; \
	TRELLIS_TEST_DB=postgresql $(2) > .$(1)-postgresql.log 2>&1 & pg=$$!; \
	rs=0; wait $$sqlite || rs=$$?; rp=0; wait $$pg || rp=$$?; \
	echo "==== SQLite (exit $$rs)"; cat .$(1)-sqlite.log; echo "==== PostgreSQL (exit $$rp)"; cat .$(1)-postgresql.log; \
	[ $$rs -eq 0 ] && [ $$rp -eq 0 ]
endef

test: install-test lint browser nginx node
	$(call on_both_databases,test,$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS))

# The tests marked `soak` (model-based and round-trip properties) with TRELLIS_SOAK=1, which they read to
# run far more Hypothesis examples than `make test` gives them.
soak: install-test
	$(call on_both_databases,test-soak,TRELLIS_SOAK=1 $(BIN)/python -m pytest -q $(XDIST) -m soak $(PYTEST_ARGS))

test-sqlite:
	TRELLIS_TEST_DB=sqlite $(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-postgresql:
	TRELLIS_TEST_DB=postgresql $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench-deps: install-test
	@command -v wrk >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; \
	  else echo "install Debian's wrk package (the benchmarks' load generator)"; exit 1; fi; }
	@$(PIP_QUIET) 'py-spy>=0.3'  # bench.request_cpu --profile samples the server with it

bench: bench-deps
	@for b in bench/*_bench.py; do echo "== $$b"; $(BIN)/python -m bench.$$(basename $$b .py) || exit 1; done

openapi: install
	$(BIN)/flask trellis openapi export openapi.json

clean:
	rm -rf $(VENV) build dist src/*.egg-info plugins/*/*.egg-info
