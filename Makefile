# sabot — `make demo` runs the main job, `make test` runs every test, `make check` the in-process ones,
# `make bench` measures. All set up .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BOARD  ?= virtual
PORT   ?=
SHOES  ?= 3

.PHONY: all demo test check lint screenshots bench figures firmware deploy table dist clean venv socat postgres golang docs

all: test

# uv (from PyPI, pinned) installs the pinned set in a few seconds where pip takes half a minute,
# their bytecode written at once (where the environment sets PYTHONDONTWRITEBYTECODE, each of the
# tests' hundreds of processes would otherwise compile what it imports of them).
# sabot is installed editable as a plain path in a .pth (editable_mode=compat): setuptools' default
# import hook costs every command's start pathlib, importlib.util and fnmatch (about 20 ms).
$(STAMP): requirements.txt requirements-stubs.txt host_tools/pyproject.toml pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==0.13.9
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -r requirements.txt \
		-C editable_mode=compat -e host_tools
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps --target $(VENV)/stubs/rp2 \
		micropython-rp2-stubs==1.29.0.post1 micropython-stdlib-stubs==1.29.0.post2
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps --target $(VENV)/stubs/esp32 \
		micropython-esp32-stubs==1.29.0.post1 micropython-stdlib-stubs==1.29.0.post2
	@touch $@

venv: $(STAMP)

# Debian packages the tests need, installed when missing: each apt run waits for another's lock
# (Go's install runs beside the rest, see golang:).
APT := apt-get -o DPkg::Lock::Timeout=600
# The browser tests drive Debian's headless Chromium with its chromedriver (no browser download).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
/usr/bin/chromedriver: /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
	$(SUDO) $(APT) install -y chromium chromium-driver || { $(SUDO) $(APT) update && \
		$(SUDO) $(APT) install -y chromium chromium-driver; }
# The scoreboard's Chinese labels drawn in the browser (and its screenshots): a CJK font.
/usr/share/fonts/truetype/wqy/wqy-microhei.ttc:
	$(SUDO) $(APT) install -y -q fonts-wqy-microhei || { $(SUDO) $(APT) update -q && \
		$(SUDO) $(APT) install -y -q fonts-wqy-microhei; }
# socat bridges a pseudo-terminal to the virtual board in the tests (a shoe as a real tty).
socat:
	@command -v socat >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO $(APT) install -y -q socat >/dev/null 2>&1 || \
		{ $$SUDO $(APT) update -q >/dev/null 2>&1 && $$SUDO $(APT) install -y -q socat >/dev/null; }; }
	@command -v socat >/dev/null 2>&1 || { echo "socat is missing and could not be installed"; exit 2; }

# systemd-analyze checks the services' units as docs/INSTALL.md has IT check them
# (tests/test_install.py); Debian's systemd package has it (nothing is started by installing it).
/usr/bin/systemd-analyze:
	$(SUDO) $(APT) install -y -q --no-install-recommends systemd >/dev/null || { \
		$(SUDO) $(APT) update -q >/dev/null && $(SUDO) $(APT) install -y -q --no-install-recommends systemd >/dev/null; }

# sqlite3 takes a SQLite pit's backup as docs/INSTALL.md has IT take it (tests/test_install.py).
/usr/bin/sqlite3:
	$(SUDO) $(APT) install -y -q sqlite3 >/dev/null || { \
		$(SUDO) $(APT) update -q >/dev/null && $(SUDO) $(APT) install -y -q sqlite3 >/dev/null; }

# The PostgreSQL audit store's tests start their own servers (tests/kit/pg.py: initdb and pg_ctl in
# a temporary directory, loopback only): Debian's postgresql provides them. Its own cluster is
# not started by this (the tests make theirs).
postgres:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO $(APT) install -y -q postgresql >/dev/null 2>&1 || \
		{ $$SUDO $(APT) update -q >/dev/null 2>&1 && $$SUDO $(APT) install -y -q postgresql >/dev/null; }; }
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { echo "postgresql is missing and could not be installed"; exit 2; }

# Go's own transparency-log code (golang.org/x/mod/sumdb/tlog and sumdb/note, Debian's
# golang-golang-x-mod-dev, built offline in GOPATH mode): the independent implementation
# tests/test_tlog.py checks sabot's tree, proofs and notes against. Installed when missing in the
# background, first, while the venv is made and the tests run (other installs wait for its lock):
# its tests wait for it (GO_INSTALL_LOG says how it went).
GO_INSTALL_LOG ?= /tmp/sabot-go-install.log
# what the tests never read of it is not unpacked (its manuals, documents and Go's own test data)
GO_LEAN := -o 'DPkg::Options::=--path-exclude=/usr/share/man/*' -o 'DPkg::Options::=--path-exclude=/usr/share/doc/*' \
	-o 'DPkg::Options::=--path-exclude=/usr/share/go-1.*/test/*' -o 'DPkg::Options::=--path-exclude=/usr/share/go-1.*/src/*/testdata/*'
golang:
	@if ls /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog >/dev/null 2>&1 && command -v go >/dev/null 2>&1; then :; else \
		echo "installing Go (golang-go, golang-golang-x-mod-dev) beside the tests: $(GO_INSTALL_LOG)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		rm -f $(GO_INSTALL_LOG).done; \
		nohup sh -c "$$SUDO $(APT) $(GO_LEAN) install -y -q --no-install-recommends golang-go golang-golang-x-mod-dev || \
			{ $$SUDO $(APT) update -q && $$SUDO $(APT) $(GO_LEAN) install -y -q --no-install-recommends golang-go golang-golang-x-mod-dev; }; \
			touch $(GO_INSTALL_LOG).done" >$(GO_INSTALL_LOG) 2>&1 </dev/null & fi

# The exact-edge kernel: game/outcomes.c, arithmetic only (its tables come from game/*.py), built
# with Debian's C compiler (installed when missing); outcome_kernel.py loads it only when its
# compiled-in CRC-32 is that of the outcomes.c beside it, and edges.py counts in Python (about 60
# times slower) without it. The validator's watch recomputes every offered wager's exact edge after each round.
KERNEL := host_tools/sabot/game/_outcomes.so
$(KERNEL): host_tools/sabot/game/outcomes.c
	@command -v cc >/dev/null 2>&1 || { $(SUDO) $(APT) install -y -q gcc libc6-dev >/dev/null || \
		{ $(SUDO) $(APT) update -q >/dev/null && $(SUDO) $(APT) install -y -q gcc libc6-dev >/dev/null; }; }
	cc -O3 -funroll-loops -Wall -Wextra -shared -fPIC -o $@ $< -DSOURCE_CRC=$$($(PYTHON) -c \
		"import sys, zlib; print(zlib.crc32(open(sys.argv[1], 'rb').read()))" $<)u

# Bytecode written ahead (each file again only once changed), as an installed package has it:
# where the environment sets PYTHONDONTWRITEBYTECODE, every sabot process would otherwise compile
# what it imports (a quarter of a second for validate's modules, in each of the tests' hundreds).
COMPILE := @$(BIN)/python -m compileall -q host_tools/sabot

demo: $(STAMP) $(KERNEL)
	$(COMPILE)
	$(BIN)/sabot demo

# ruff and mypy read the root pyproject.toml: the same check as `ruff check .` and `mypy` here.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# every test, in parallel (pytest-xdist): most of the time is spent waiting on boards and other
# processes, so more workers than cores. Tests go out one at a time (--dist load --maxschedchunk 1),
# the ones marked `long` first (tests/conftest.py), so no worker is left finishing a soak at the
# end (on 2 cores, 690 tests: -n 4 --dist worksteal in file order 3 min 22 s, -n 4 long first
# 3 min 0 s, -n 6 long first 2 min 52 s; -n 8 was slower; 1,055 tests now, on a fresh clone: 2 min 40 s
# in pytest, 2 min 51 s in all, load average 1.6 at the start, 3.8 at the end). Each test has its own
# directories, ports and element stores; a module fixture runs on each worker each time it takes
# up that module's tests.
TEST_WORKERS ?= 6
# The lint runs beside the tests (they mostly wait on boards): its output is shown, and it fails the
# run, once the tests are done.
# The test modules as pytest rewrites their asserts, written once before the workers start (each
# worker collects every test: where PYTHONDONTWRITEBYTECODE is set, each would rewrite them all).
test: golang $(STAMP) $(KERNEL) socat postgres /usr/bin/chromedriver /usr/bin/systemd-analyze \
	/usr/bin/sqlite3
	$(COMPILE)
	$(BIN)/sabot table check
	@PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider tests \
		>/dev/null || true
	@lint=$$(mktemp); { $(BIN)/ruff check . && $(BIN)/mypy; } >$$lint 2>&1 & pid=$$!; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist load --maxschedchunk 1 \
		--durations=12 tests; rc=$$?; \
	wait $$pid; lrc=$$?; echo "lint (ruff, mypy):"; cat $$lint; rm -f $$lint; \
	[ $$rc = 0 ] && [ $$lrc = 0 ]

# the tests that run in this process alone (no board, MicroPython or other subprocess), on three
# workers (some wait on sockets beside the CPU-bound ones: -n 2 took 63 s, -n 3 52 s on 2 cores)
check: $(STAMP) $(KERNEL)
	$(COMPILE)
	$(BIN)/python -m pytest -q -n 3 --dist worksteal -m "not board" tests

# the documents as a site (mkdocs.yml: Material, README as the home page) in build/site, built
# strictly: a link to a page or an anchor that is not there fails it (tests/test_docs_site.py runs
# the same build in `make test`). The command reference docs/CLI.md is written first, from the
# parsers (tests/test_cli_reference.py fails while the committed one differs from them).
docs: $(STAMP)
	$(BIN)/python -m sabot.cli.reference --write docs/CLI.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

# docs/*.png, the pages as the browser tests see them (a plain test run writes them to a temporary
# file, so it leaves the checkout as it found it)
screenshots: golang $(STAMP) $(KERNEL) socat postgres /usr/bin/chromedriver
	$(COMPILE)
	SABOT_SCREENSHOTS=1 $(BIN)/python -m pytest -q -n 3 tests/test_serve.py tests/test_shift.py \
		tests/test_pit_operations.py

# speed and memory figures of the tools and firmware, printed and written to docs/FIGURES.md
# (`make figures` is the same; `sabot bench` is something else: a scripted shoe through a shoe,
# round by round)
bench figures: $(STAMP) $(KERNEL)
	SABOT_BENCH_COMMAND="make $@" $(BIN)/python bench/bench.py

table: $(STAMP)
	$(BIN)/sabot table generate

firmware: $(STAMP)
	$(BIN)/sabot firmware --board $(BOARD)

KEY ?= sabot.key
deploy: $(STAMP)
	@test -n "$(PORT)" || { echo "make deploy needs PORT=URL (e.g. PORT=/dev/ttyACM0)"; exit 2; }
	$(BIN)/sabot deploy --board $(BOARD) --port $(PORT) --key $(KEY)

# The package a pit host or a bench installs (docs/INSTALL.md): dist/sabot-VERSION.tar.gz and its
# wheel, built by uv from a staged copy of the committed-to-be files (git ls-files: nothing a run
# left behind) — host_tools' package, the firmware and boards as its data (sabot/tree), and
# packaging/setup.py, which compiles the exact-edge kernel into the wheel (or on install from the
# sdist). The wheel is built from the sdist, so the sdist is known to be whole.
DIST ?= dist
DIST_STAGE ?= build/dist-src
dist: $(STAMP)
	rm -rf $(DIST_STAGE) $(DIST)
	mkdir -p $(DIST_STAGE)/sabot/tree
	git ls-files -z host_tools/sabot | tar --null -T - -cf - | tar -xf - -C $(DIST_STAGE) --strip-components=1
	git ls-files -z firmware boards | tar --null -T - -cf - | tar -xf - -C $(DIST_STAGE)/sabot/tree
	cp host_tools/pyproject.toml packaging/setup.py $(DIST_STAGE)/
	$(BIN)/uv build -q --out-dir $(DIST) $(DIST_STAGE)
	$(BIN)/python packaging/constraints.py host_tools/pyproject.toml firmware > $(DIST)/sabot-constraints.txt
	@ls $(DIST)/*

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache $(KERNEL)
