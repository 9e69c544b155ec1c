"""What scripts/bench and scripts/bench-instr share (standard library only):
command-line parsing with the shell scripts' messages, installing a tool as
root, building the benchmark's targets, and the environment of one run.

Every failure here is reported as "PROG: what went wrong" on stderr, with the
exit status the shell versions had (2: a bad command line, 1: anything else).
"""
import os
import shutil
import subprocess
import sys

# The build products every benchmark run needs, relative to the build tree.
GRAPH_BENCH = "tests/apps/bench/graph_bench"
SHIM = "src/libvaremap_shim.so"
SIMCUDA = "tests/simcuda/libcuda.so.1"
PTX = "tests/kernels/vr_kernels.ptx"
TARGETS = [GRAPH_BENCH, SHIM, SIMCUDA, PTX]

# A run never inherits the caller's shim or knobs.
RUN_UNSET = ("LD_PRELOAD", "VAREMAP_CONFIG", "VAREMAP_MODE", "VAREMAP_LOG", "SIMCUDA_COST",
             "SIMCUDA_FAIL")


def root():
    """The repository root: the scripts run from there, as the shell ones did."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def die(prog, msg, rc=1):
    print("%s: %s" % (prog, msg), file=sys.stderr)
    sys.exit(rc)


class Args:
    """A cursor over argv that answers the way the shell scripts did."""

    def __init__(self, prog, argv):
        self.prog, self.argv, self.i = prog, list(argv), 0

    def __iter__(self):
        while self.i < len(self.argv):
            a = self.argv[self.i]
            self.i += 1
            yield a

    def value(self, opt, what=None):
        if self.i >= len(self.argv) or self.argv[self.i] == "":
            die(self.prog, "%s needs %s" % (opt, what or "a value"), 2)
        v = self.argv[self.i]
        self.i += 1
        return v

    def unknown(self, opt, usage=None):
        print("%s: unknown option %s" % (self.prog, opt), file=sys.stderr)
        if usage:
            print(usage, file=sys.stderr)
        sys.exit(2)


def help_text(doc, lines):
    """The first LINES lines of a script's docstring: its --help."""
    return "\n".join(doc.strip("\n").split("\n")[:lines])


def is_root():
    return os.geteuid() == 0


def apt_install(package):
    """apt-get install PACKAGE quietly, updating the lists once if needed;
    True when it installed."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    q = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    if subprocess.run(["apt-get", "install", "-y", "-qq", package], **q).returncode == 0:
        return True
    if subprocess.run(["apt-get", "update", "-qq"], **q).returncode != 0:
        return False
    return subprocess.run(["apt-get", "install", "-y", "-qq", package], **q).returncode == 0


def build_targets(prog, build, deps=()):
    """scripts/setup-deps for a demo build (plus DEPS), a meson setup of BUILD
    without the suites when it has none, and ninja for the bench targets."""
    env = dict(os.environ, VAREMAP_NO_CRITERION="1")
    if subprocess.run(["scripts/setup-deps"] + list(deps), env=env).returncode != 0:
        sys.exit(1)
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        if subprocess.run(["meson", "setup", build, "-Dsuites=disabled"],
                          stdout=subprocess.DEVNULL).returncode != 0:
            sys.exit(1)
    if subprocess.run(["ninja", "-C", build] + TARGETS, stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit(1)


def artifacts(prog, build):
    """Absolute paths of the bench targets in BUILD: graph_bench, the shim,
    simcuda's directory and the PTX. Stops when one is missing."""
    paths = [os.path.join(build, t) for t in TARGETS]
    for p in paths:
        if not os.path.exists(p):
            die(prog, "missing %s (build %s first)" % (p, build))
    gb, shim, sim, ptx = (os.path.realpath(p) for p in paths)
    return gb, shim, os.path.dirname(sim), ptx


def run_env(unset=RUN_UNSET, **vars):
    """The caller's environment less UNSET, plus VARS. The standard kernels
    run as simcuda's host versions (SIMCUDA_KERNELS=host) unless the caller
    chose: a benchmark measures the shim, not the PTX interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.setdefault("SIMCUDA_KERNELS", "host")
    env.update(vars)
    return env


def have(tool):
    return shutil.which(tool) is not None
