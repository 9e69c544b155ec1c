#!/usr/bin/env python3
"""The bench suite's policy checks: graph_bench without the shim and with it,
the shim's counters and decision log read back, each expectation a named
assertion that prints what was expected and what was seen.

    check_bench.py CHECK ARGS...

    check PATTERN                 correctness: checksums equal, host replay ok
    order PATTERN ORDER MODE      SetParams out of node order
    pass PATTERN                  an exec that absorbs nothing passes
    reprobe STILL_FROM            a passing exec compares again, backing off
    settle PATTERN                slices that save nothing settle
    update PATTERN MOVES [--expect-update-absorbed]
                                  recapture/rebuild: bytes with and without
                                  the shim (dedup, profiled; recapture in
                                  every capture mode), and what reached the
                                  driver (reported; asserted with the flag)
    priced                        every driver call a run makes has a price
    repeat PATTERN [RUNS]         same program, same prices: same decisions
    heap                          scripts/bench's heap fields per scaling row

The programs come from the environment: GB (graph_bench), SHIM
(libvaremap_shim.so), COST (the cost model, `priced`), SRC and BUILD (the
source and build trees, `heap`). Exit status: 0 when every assertion holds,
1 when one does not, 77 (meson's skip) when a check cannot measure here.
Standard library only.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

NODES = 64
SMALL = ["--nodes", str(NODES), "--elems", "32", "--bytes", "2M"]
PATTERNS = ["stable", "rebind", "realloc", "pingpong", "fanout", "periodic", "churn"]
CAPTURE_MODES = ["global", "thread", "relaxed"]
UPDATE_MODES = ["dedup", "profiled"]
SETPARAMS = ("cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams",
             "cuGraphExecNodeSetParams")
UPDATES = ("cuGraphExecUpdate_v2", "cuGraphExecUpdate")


class Checks:
    """Named assertions: every one runs and prints; the exit status says
    whether all held, so one failure does not hide the others."""

    def __init__(self):
        self.failed = []

    def expect(self, name, ok, expected, seen):
        if ok:
            print("ok   %s: %s" % (name, seen))
        else:
            print("FAIL %s: expected %s, saw %s" % (name, expected, seen))
            self.failed.append(name)
        return ok

    def equal(self, name, seen, want):
        return self.expect(name, seen == want, repr(want), repr(seen))

    def at_least(self, name, seen, low):
        return self.expect(name, seen is not None and seen >= low, ">= %r" % (low,), repr(seen))

    def done(self):
        if self.failed:
            print("%d check(s) failed: %s" % (len(self.failed), ", ".join(self.failed)))
            return 1
        return 0


def env_for(mode=None, log=None, extra=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if mode is not None:
        env["LD_PRELOAD"] = os.environ["SHIM"]
        env["VAREMAP_MODE"] = mode
    if log is not None:
        env["VAREMAP_LOG"] = log
    env.update(extra or {})
    return env


def last_json(text):
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if not lines:
        return None
    try:
        return json.loads(lines[-1])
    except ValueError:
        return None


class Pair:
    """graph_bench without the shim and with it in MODE (its decision log in
    self.log): both must exit 0 (graph_bench exits 3 when its buffers differ
    from its host replay) with equal checksums, bit for bit."""

    def __init__(self, checks, mode, args, log):
        gb = os.environ["GB"]
        self.log = log
        a = subprocess.run([gb] + args, env=env_for(), stdout=subprocess.PIPE, text=True)
        b = subprocess.run([gb] + args, env=env_for(mode, log), stdout=subprocess.PIPE, text=True)
        ja, jb = last_json(a.stdout), last_json(b.stdout)
        ca = ja and ja.get("checksum")
        cb = jb and jb.get("checksum")
        print("none: %s  %s: %s" % (ca, mode, cb))
        checks.equal("graph_bench exits 0 without the shim", a.returncode, 0)
        checks.equal("graph_bench exits 0 under the shim (%s)" % mode, b.returncode, 0)
        checks.expect("checksum without the shim", bool(ca), "a checksum", repr(ca))
        checks.equal("checksum under the shim (%s) equals the one without" % mode, cb, ca)
        self.final = (jb or {}).get("shim_final") or {}
        self.at_warmup = (jb or {}).get("shim_at_warmup") or {}
        self.at_end = (jb or {}).get("shim_at_end") or {}
        self.calls = (jb or {}).get("driver_calls_per_step") or {}

    def num(self, name):
        return self.final.get(name)

    def lines(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            return []

    def count(self, text):
        return sum(1 for l in self.lines() if text in l)


def accounted(checks, pair, calls):
    """Every update the program made is seen once, then skipped or forwarded."""
    seen, skipped, fwd = (pair.num(k) for k in
                          ("setparams_seen", "setparams_skipped", "setparams_forwarded"))
    print("seen %s skipped %s forwarded %s" % (seen, skipped, fwd))
    checks.equal("setparams_seen = the program's calls", seen, calls)
    checks.equal("setparams_seen = skipped + forwarded", seen,
                 None if skipped is None or fwd is None else skipped + fwd)
    return seen, skipped, fwd


FALLBACK_SETPARAMS = '"event":"fallback","what":"setparams"'


def check_correct(checks, log, pattern):
    """Correctness only, nothing timed: every pattern in profiled mode.
    fanout remaps slots side by side (its moving buffers' slots come first):
    their access is granted in fewer cuMemSetAccess calls than there are
    maps (vr_slices_remap_many)."""
    p = Pair(checks, "profiled", ["--pattern", pattern, "--steps", "24", "--warmup", "6"] + SMALL,
             log)
    if pattern == "fanout":
        maps, access = p.calls.get("cuMemMap", 0), p.calls.get("cuMemSetAccess", 0)
        print("per step: cuMemMap %s cuMemSetAccess %s" % (maps, access))
        checks.expect("fanout remaps slots", maps > 0, "> 0", repr(maps))
        checks.expect("adjacent slots share a cuMemSetAccess", access < maps,
                      "< %r" % maps, repr(access))


def check_order(checks, log, pattern, order, mode):
    """SetParams in another order than the graph's nodes: the absorbed path
    learns the order and falls back to the hash when it changes; under
    `stable` every call after the transition (launch 4) is skipped."""
    p = Pair(checks, mode, ["--pattern", pattern, "--order", order, "--steps", "24",
                            "--warmup", "6"] + SMALL, log)
    _, skipped, _ = accounted(checks, p, NODES * 24)
    if pattern == "stable":
        checks.at_least("stable: every update after the transition skipped", skipped, NODES * 20)


def check_pass(checks, log, pattern):
    """An exec that absorbs nothing (fanout under dedup) passes after two
    windows of 32 launches; a stable one never does."""
    p = Pair(checks, "dedup", ["--pattern", pattern, "--steps", "140", "--warmup", "6"] + SMALL,
             log)
    accounted(checks, p, NODES * 140)
    n = p.count(FALLBACK_SETPARAMS)
    print("setparams fallbacks: %d" % n)
    checks.equal("setparams fallbacks (passing) under %s" % pattern, n,
                 1 if pattern == "fanout" else 0)


def first_forwarded_after_reprobe(lines):
    """Nodes whose first update after the first exec_reprobe was forwarded,
    up to the first wrap of the node order."""
    on, k, last = False, 0, None
    for l in lines:
        if '"event":"exec_reprobe"' in l:
            on = True
            continue
        if on and '"event":"setparams_forwarded"' in l:
            m = re.findall(r'"node":\s*(-?\d+)', l)
            n = int(m[-1]) if m else 0
            if k and n <= last:
                break
            k += 1
            last = n
    return k


def check_reprobe(checks, log, still):
    """A passing exec compares again 256 launches later and twice as late
    each time its updates still change (counted in launches). Every node's
    first update after a reprobe reaches the driver: the shadows are stale."""
    os.environ["VAREMAP_LOG_LEVEL"] = "debug"
    p = Pair(checks, "dedup", ["--pattern", "fanout", "--steps", "1000", "--warmup", "6"] + SMALL
             + ["--still-from", still], log)
    seen, skipped, fwd = (p.num(k) for k in
                          ("setparams_seen", "setparams_skipped", "setparams_forwarded"))
    lines = p.lines()
    passing = sum(1 for l in lines if FALLBACK_SETPARAMS in l)
    reprobes = sum(1 for l in lines if '"event":"exec_reprobe"' in l)
    first = first_forwarded_after_reprobe(lines)
    print("seen %s skipped %s forwarded %s; passing: %d, reprobes: %d, nodes sent whole after "
          "the first reprobe: %d of %d" % (seen, skipped, fwd, passing, reprobes, first, NODES))
    checks.equal("setparams_seen = the program's calls", seen, NODES * 1000)
    checks.equal("setparams_seen = skipped + forwarded", seen,
                 None if skipped is None or fwd is None else skipped + fwd)
    checks.equal("nodes forwarded whole after the first reprobe", first, NODES)
    if still == "0":
        checks.equal("moving buffers: times passing (64, 328, 848)", passing, 3)
        checks.equal("moving buffers: reprobes (320, 840)", reprobes, 2)
    else:
        checks.equal("settling buffers: times passing", passing, 1)
        checks.equal("settling buffers: reprobes", reprobes, 1)
        checks.at_least("settling buffers: updates absorbed after the reprobe", skipped,
                        NODES * (1000 - 321))


def check_settle(checks, log, pattern):
    """The slices are made where the cost model expects them to pay, and
    given up when they do not (a fallback "rebind" whose slices cost more
    than they saved, never one where both sides are 0):
      realloc   the re-allocated output has one node: a remap per step costs
                more than its update: no slice for it, nothing to settle
      periodic  the moving buffers' 64 updates a step cost more than the
                variants of a period: slices, variants, and no update
                reaching the driver after the warm-up steps
      fanout    8 buffers of 8 nodes each, replaced at random: variants do
                not recur, the remaps cost more than they save: it settles,
                then passes (a fallback "setparams")"""
    p = Pair(checks, "profiled", ["--pattern", pattern, "--steps", "140", "--warmup", "6"] + SMALL
             + ["--sync-every", "1"], log)
    for l in p.lines():
        if '"event":"fallback"' in l:
            print(l)
    z = p.count('"what":"rebind","reason":"slices cost 0 us (0 updates, 0 remaps) for 0 us saved')
    r = p.count('"what":"rebind"')
    n = p.count('"what":"setparams"')
    active = p.count('"event":"profile_decision","exec"') and p.count('"state":"active"')
    fwd = (p.at_end.get("setparams_forwarded"), p.at_warmup.get("setparams_forwarded"))
    print("settled: %d (having saved nothing: %d)  passing: %d  active: %d  forwarded "
          "end/warm-up: %r" % (r, z, n, active, fwd))
    checks.equal("never settled on 0 us against 0 us", z, 0)
    if pattern == "realloc":
        checks.equal("nothing to settle (fallback rebind)", r, 0)
        checks.expect("the output's update forwarded, one a step", None not in fwd and
                      fwd[0] - fwd[1] <= 140, "<= 140 after the warm-up", repr(fwd))
    if pattern == "periodic":
        checks.equal("slices (profile_decision active)", active, 1)
        checks.equal("nothing to settle (fallback rebind)", r, 0)
        checks.expect("no update forwarded after the warm-up", None not in fwd and fwd[0] == fwd[1],
                      "end == warm-up", repr(fwd))
    if pattern == "fanout":
        # Asserted in every build, AddressSanitizer's too: the shim weighs
        # with the cost model's prices (VAREMAP_COST_PRICES=model, the
        # default), so how long the instrumented calls took reaches no
        # verdict.
        checks.equal("settled (fallback rebind)", r, 1)
        checks.equal("passing (fallback setparams) after settling", n, 1)


def prices():
    """name -> ns from the cost model (COST), or {} without one."""
    out = {}
    try:
        with open(os.environ.get("COST", "")) as f:
            for line in f:
                fl = line.split("#", 1)[0].split()
                if len(fl) >= 2 and fl[1].isdigit():
                    out[fl[0]] = int(fl[1])
    except OSError:
        pass
    return out


def run_gb(args, mode=None, log=None):
    r = subprocess.run([os.environ["GB"]] + args, env=env_for(mode, log), stdout=subprocess.PIPE,
                       text=True)
    return r.returncode, last_json(r.stdout) or {}


def update_calls(checks, what, base, run, cost, expect):
    """What reached the driver per timed step (graph_bench's one-run
    counters), priced at the cost model: the run without the shim, the
    same less its updates' price (what the shim should get to), and the
    run with it. With `expect` (--expect-update-absorbed): no update
    reaches the driver, no SetParams either when nothing changes, and at
    most one per changed node otherwise."""
    calls = run.get("driver_calls_per_step") or {}
    bcalls = base.get("driver_calls_per_step") or {}
    upd = sum(calls.get(k, 0) for k in UPDATES)
    sp = sum(calls.get(k, 0) for k in SETPARAMS)
    changed = run.get("changed_nodes_per_step")
    priced = lambda c: sum(v * cost.get(k, 0) for k, v in c.items())
    floor = priced(bcalls) - sum(bcalls.get(k, 0) * cost.get(k, 0) for k in UPDATES)
    print("%s: per step %.4g updates and %.4g SetParams reached the driver (%s nodes changed); "
          "priced %.0f ns, without the shim %.0f ns, less its updates %.0f ns"
          % (what, upd, sp, changed, priced(calls), priced(bcalls), floor))
    if not expect:
        return
    checks.equal("%s: updates reaching the driver per step" % what, upd, 0)
    if changed == 0 or (what.endswith("profiled") and "pingpong" in what):
        checks.equal("%s: SetParams reaching the driver per step" % what, sp, 0)
    else:
        checks.expect("%s: SetParams per step at most the changed nodes" % what,
                      changed is not None and sp <= changed, "<= %s" % changed, repr(sp))


def check_update(checks, log, pattern, moves, expect):
    """recapture and rebuild (a new graph every step, cuGraphExecUpdate):
    graph_bench exits 0 (its host replay holds) with and without the shim,
    in dedup and profiled, with bytes equal to the run without it, in every
    capture mode for recapture. The shim's savings are reported, and
    asserted only with --expect-update-absorbed."""
    cost = prices()
    for cm in CAPTURE_MODES if pattern == "recapture" else [None]:
        args = (["--pattern", pattern, "--moves", moves, "--steps", "24", "--warmup", "6"] + SMALL
                + (["--capture-mode", cm] if cm else []))
        what = "/".join(x for x in (pattern, moves, cm) if x)
        rc, base = run_gb(args)
        ca = base.get("checksum")
        checks.equal("%s: graph_bench exits 0 without the shim" % what, rc, 0)
        checks.expect("%s: checksum without the shim" % what, bool(ca), "a checksum", repr(ca))
        for mode in UPDATE_MODES:
            rc, run = run_gb(args, mode, log)
            checks.equal("%s: graph_bench exits 0 under the shim (%s)" % (what, mode), rc, 0)
            checks.equal("%s: checksum under the shim (%s) equals the one without" % (what, mode),
                         run.get("checksum"), ca)
            update_calls(checks, "%s/%s" % (what, mode), base, run, cost, expect)


# Decision events and the fields that make the decision: times, pids,
# addresses and the measured prices are left out (noise may move a price,
# never a decision).
DECISION_EVENTS = ("profile_decision", "exec_state", "fallback", "exec_reprobe", "exec_reset")
DECISION_SUMMARY = ("execs_active", "execs_disabled", "variants")


def decisions(path):
    out = []
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    for l in lines:
        try:
            ev = json.loads(l)
        except ValueError:
            continue
        e = ev.get("event")
        if e == "summary":
            out.append(("summary",) + tuple((k, ev.get(k)) for k in DECISION_SUMMARY if k in ev))
        if e not in DECISION_EVENTS:
            continue
        if e == "profile_decision":
            # the prices weighed too: timing must not reach them
            out.append((e, ev.get("state"), ev.get("launches"),
                        tuple((c.get("size"), c.get("anchors"), c.get("verdict"))
                              for c in ev.get("candidates", [])),
                        tuple(sorted((ev.get("costs_ns") or {}).items()))))
        elif e == "exec_state":
            out.append((e, ev.get("from"), ev.get("to")))
        elif e == "fallback":
            # the reason's numbers are counts and priced sums: kept
            out.append((e, ev.get("what"), ev.get("reason")))
        else:
            out.append((e,))
    return out


def check_repeat(checks, log, pattern, runs="10"):
    """The same program with the same prices (simcuda's SIMCUDA_COST from
    the cost model) makes the same sequence of decisions in every run: the
    decision events of the logs equal, apart from times and addresses."""
    price_list = ["%s:%d" % kv for kv in prices().items()]
    seqs = []
    for r in range(int(runs)):
        if os.path.exists(log):
            os.unlink(log)
        env = env_for("profiled", log, {"SIMCUDA_COST": ",".join(price_list),
                                        "VAREMAP_COST_MODEL": os.environ["COST"],
                                        "VAREMAP_LOG_LEVEL": "debug"})
        p = subprocess.run([os.environ["GB"], "--pattern", pattern, "--nodes", "1000",
                            "--steps", "300", "--warmup", "20", "--elems", "16", "--bytes", "2M"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        checks.equal("run %d: graph_bench exits 0" % (r + 1), p.returncode, 0)
        seq = decisions(log)
        # the variants made are decisions the log does not list one by one
        at_end = (last_json(p.stdout) or {}).get("shim_at_end") or {}
        if seq is not None:
            seq.append(("variants_at_end", at_end.get("variants")))
        seqs.append(seq)
    first = seqs[0]
    print("run 1: %d decision events" % len(first or []))
    for d in first or []:
        print("   ", d)
    for r, s in enumerate(seqs[1:], 2):
        if s != first:
            for i, (a, b) in enumerate(zip(first, s)):
                if a != b:
                    print("run %d differs at event %d: %r / %r" % (r, i, a, b))
                    break
            else:
                print("run %d: %d events, run 1: %d" % (r, len(s), len(first)))
        checks.equal("run %d's decisions equal run 1's" % r, s == first, True)


PRICE_SOURCES = ("estimate", "public", "same as", "measured")


def check_priced(checks):
    """Every driver entry point a bench run calls (the program's and the
    shim's, any pattern, any mode) has a price, and every price says where
    it comes from."""
    cost = os.environ["COST"]
    priced = set()
    with open(cost) as f:
        for line in f:
            fields = line.split(None, 2)
            if not fields or fields[0].startswith("#"):
                continue
            name = fields[0]
            ns = fields[1] if len(fields) > 1 else ""
            rest = fields[2].rstrip("\n") if len(fields) > 2 else ""
            priced.add(name)
            checks.expect("%s: price is a number of ns" % name, ns.isdigit(), "digits", repr(ns))
            checks.expect("%s: price names its source" % name,
                          rest.startswith("#") and any(s in rest for s in PRICE_SOURCES),
                          "a comment naming one of %r" % (PRICE_SOURCES,), repr(rest))
    for pattern in PATTERNS:
        for mode in ("none", "observe", "dedup", "profiled"):
            with tempfile.TemporaryDirectory() as d:
                st = os.path.join(d, "stats.json")
                env = env_for(None if mode == "none" else mode,
                              extra={"SIMCUDA_STATS": st, "VAREMAP_MODE": mode})
                r = subprocess.run([os.environ["GB"], "--pattern", pattern, "--nodes", "16",
                                    "--steps", "12", "--warmup", "6", "--elems", "16",
                                    "--bytes", "2M"], env=env, stdout=subprocess.DEVNULL)
                checks.equal("%s/%s: graph_bench exits 0" % (pattern, mode), r.returncode, 0)
                try:
                    with open(st) as f:
                        text = f.read()
                except OSError:
                    text = ""
                called = sorted(set(re.findall(r'"(cu[A-Za-z0-9_]*)": [1-9][0-9]*', text)))
                checks.expect("%s/%s: simcuda's stats list the calls" % (pattern, mode),
                              bool(called), "some calls", repr(called))
                missing = [n for n in called if n not in priced]
                checks.expect("%s/%s: every call priced in %s" % (pattern, mode, cost),
                              not missing, "none unpriced", "unpriced: %r" % missing)


def check_heap(checks):
    """graph_bench reports the driver's heap share with and without the shim,
    and a small scripts/bench run carries the shim's and the driver's bytes
    per node, as numbers, in every scaling row with the shim."""
    gb, shim = os.environ["GB"], os.environ["SHIM"]
    for pre in ("", shim):
        env = env_for(extra={"LD_PRELOAD": pre})
        r = subprocess.run([gb, "--pattern", "stable", "--nodes", "16", "--steps", "8",
                            "--warmup", "4", "--elems", "16", "--bytes", "2M"], env=env,
                           stdout=subprocess.PIPE, text=True)
        j = last_json(r.stdout) or {}
        v = j.get("driver_heap_bytes")
        checks.expect("driver_heap_bytes (preload '%s')" % pre,
                      isinstance(v, int) and v > 0, "a positive integer", repr(v))
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([os.path.join(os.environ["SRC"], "scripts", "bench"), "--quick",
                            "--scale-only", "--scale-nodes", "100", "--no-build",
                            "--cost", os.environ["COST"], "--build",
                            os.environ["BUILD"], "--out", out], stdout=subprocess.DEVNULL)
        checks.equal("scripts/bench exits 0", r.returncode, 0)
        try:
            with open(os.path.join(out, "bench.json")) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            checks.expect("bench.json readable", False, "a JSON document", str(e))
            return
    rows = [r for r in doc["scaling"] if r["mode"] != "none"]
    checks.equal("scaling rows with the shim", len(rows), 6)
    if all(r["heap_bytes"] == 0 for r in doc["scaling"]):
        print("skip: mallinfo2 reports no heap (a sanitizer's allocator)")
        sys.exit(77)
    for r in rows:
        what = "%s/%s" % (r["pattern"], r["mode"])
        for k in ("bookkeeping_bytes_per_node", "driver_heap_bytes_per_node",
                  "heap_delta_bytes_per_node"):
            checks.expect("%s: %s is a number" % (what, k),
                          isinstance(r[k], (int, float)) and not isinstance(r[k], bool),
                          "a number", repr(r[k]))
        m = r.get("bookkeeping_method") or ""
        checks.expect("%s: bookkeeping method" % what, m.startswith("heap - driver heap"),
                      "'heap - driver heap ...'", repr(m))
        b = r["bookkeeping_bytes_per_node"]
        checks.expect("%s: the shim's own bytes per node (node shadows at least)" % what,
                      isinstance(b, (int, float)) and b > 0, "> 0", repr(b))
        # fanout's variants are driver objects the shim made: the driver's
        # share. Only while some are alive at exit (`variants`, the live
        # count): fanout at N=100 settles once its remaps cost more than
        # they save, and when that happens depends on what the stream
        # worker finished (a loaded machine settles earlier), after which
        # its variants are gone and the driver's heap is the baseline's.
        if r["pattern"] == "fanout" and r["mode"] == "profiled":
            d, live = r["driver_heap_bytes_per_node"], r.get("variants")
            print("%s: %s live variants, driver bytes per node %r" % (what, live, d))
            if not isinstance(live, int) or live > 0:
                checks.expect("%s: the driver's bytes per node (%s variants alive)" % (what, live),
                              isinstance(d, (int, float)) and d > 100, "> 100", repr(d))


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    what, args = argv[1], argv[2:]
    checks = Checks()
    fd, log = tempfile.mkstemp(prefix="graph_bench.", suffix=".jsonl")
    os.close(fd)
    try:
        if what == "check" and len(args) == 1:
            check_correct(checks, log, *args)
        elif what == "order" and len(args) == 3:
            check_order(checks, log, *args)
        elif what == "pass" and len(args) == 1:
            check_pass(checks, log, *args)
        elif what == "reprobe" and len(args) == 1:
            check_reprobe(checks, log, *args)
        elif what == "settle" and len(args) == 1:
            check_settle(checks, log, *args)
        elif what == "repeat" and 1 <= len(args) <= 2:
            check_repeat(checks, log, *args)
        elif what == "update" and len(args) in (2, 3) and args[0] in ("recapture", "rebuild") \
                and args[2:] in ([], ["--expect-update-absorbed"]):
            check_update(checks, log, args[0], args[1], len(args) == 3)
        elif what == "priced" and not args:
            check_priced(checks)
        elif what == "heap" and not args:
            check_heap(checks)
        else:
            print("check_bench.py: unknown check or arguments: %s" % " ".join(argv[1:]))
            return 2
    finally:
        os.unlink(log)
    return checks.done()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
