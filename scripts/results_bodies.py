"""results_bodies.py - the pages of the campaigns whose figures are not busbw
against size (render_results.py's custom pages): each body_* takes the
campaign's JSON and returns (parameters, Markdown lines, plots), every
claim a ratio against the peer or reference measured in the same run.
BODIES maps the JSON's "benchmark" to its body."""
import math

from results_format import busy, fmt, md_table, med_or_none, median, ms, pct, ratio, sig, size_name


def body_scale(doc):
    rs = doc["results"]
    configs = []
    for r in rs:
        c = (r["transport"], r["connect"])
        if c not in configs:
            configs.append(c)
    ranks = sorted({r["ranks"] for r in rs})

    def med(n, c, key):
        return med_or_none([r[key] for r in rs if r["ranks"] == n and (r["transport"], r["connect"]) == c])

    head = ["ranks"] + ["%s %s: creation / first collective (ms)" % c for c in configs]
    trs = sorted({c[0] for c in configs})
    pairs = [t for t in trs if (t, "eager") in configs and (t, "lazy") in configs]
    head += ["%s lazy / eager creation" % t for t in pairs]
    rows = []
    for n in ranks:
        row = [str(n)]
        for c in configs:
            a, b = med(n, c, "init_ms"), med(n, c, "first_coll_ms")
            row.append("%s / %s" % (fmt(a, 1), fmt(b, 1)))
        for t in pairs:
            row.append(ratio(med(n, (t, "lazy"), "init_ms"), med(n, (t, "eager"), "init_ms")))
        rows.append(row)
    mem_head = ["ranks"] + ["%s %s: fds / RSS MiB (most per rank)" % c for c in configs]
    mem = [[str(n)] + ["%s / %s" % (fmt(med(n, c, "fds_all_max"), 0),
                                    fmt((med(n, c, "rss_all_kb_max") or 0) / 1024 or None, 1))
                       for c in configs] for n in ranks]
    growth = []
    if len(ranks) > 1:
        for c in configs:
            a, b = med(ranks[0], c, "init_ms"), med(ranks[-1], c, "init_ms")
            growth.append("%s %s: %s times the creation time at %d ranks for %.0f times the ranks"
                          % (c[0], c[1], ratio(b, a), ranks[0], ranks[-1] / ranks[0]))
    text = ["Creation time (ms; the median over the repeats of the most over the ranks), and the "
            "ratio of lazy to eager connection set-up measured in the same campaign:", "",
            md_table(head, rows), ""]
    if growth:
        text += ["From %d to %d ranks: %s." % (ranks[0], ranks[-1], "; ".join(growth)), ""]
    text += ["File descriptors and resident memory after the alltoall (every connection made), the "
             "most over the ranks, median over the repeats:", "", md_table(mem_head, mem), ""]
    series = []
    for c in configs:
        for key, what in (("init_ms", "creation"), ("first_coll_ms", "first collective")):
            series.append(("%s %s: %s" % (c[0], c[1], what), [(n, med(n, c, key)) for n in ranks]))
    plot = ("time", "Communicator creation against ranks (one host)", "ranks", "time (ms)", True, False,
            series)
    params = "ranks %s, transports %s, repeats %s" % (
        " ".join(str(n) for n in ranks), " ".join(trs), doc.get("params", {}).get("repeats"))
    return params, text, [plot]


def body_train_accuracy(doc):
    rs = doc["results"]
    by = {r["run"]: r for r in rs}
    rows = []
    for r in rs:
        ref = "r1" if r["codec"] == "dense" and r["run"] != "r1" else ("r4" if r["codec"] != "dense" else None)
        ref_r = by.get(ref) if ref else None
        name = "%d rank%s%s" % (r["ranks"], "s" if r["ranks"] > 1 else "",
                                "" if r["codec"] == "dense" else ", " + r["codec"])
        diff = ("%+.2f points" % (100 * (r["final_test_acc"] - ref_r["final_test_acc"]))
                if ref_r and r["final_test_acc"] is not None and ref_r["final_test_acc"] is not None else "-")
        rows.append([name, pct(r["final_test_acc"]), fmt(r["final_loss"], 4), fmt(r["train_s"], 1),
                     fmt(r.get("samples_per_s"), 0),
                     ("%s: %s" % ("1 rank" if ref == "r1" else "4 ranks dense", diff)) if ref_r else "reference",
                     ratio(r["train_s"], ref_r["train_s"]) if ref_r else "-"])
    head = ["run", "test accuracy", "final loss", "training (s)", "samples/s", "accuracy vs reference",
            "time / reference's"]
    text = ["Each run against its reference in this campaign (the rank counts against 1 rank, the "
            "codecs against the dense run on 4 ranks): the difference in test accuracy and the ratio "
            "of the training times (< 1: faster).", "",
            md_table(head, rows, ["---", "---:", "---:", "---:", "---:", "---", "---:"]), ""]
    p = doc.get("params", {})
    warm = p.get("codec_warmup_epochs")
    return ("data %s, %s epoch(s), global batch %s%s" % (
        p.get("data"), p.get("epochs"), p.get("global_batch"),
        "" if warm is None else ", the codecs after %s dense epoch(s)" % warm), text, [])


def body_zero(doc):
    rs = doc["results"]
    plain = {r["ranks"]: r for r in rs if r["zero"] == 0}
    rows = []
    for r in rs:
        ref = plain.get(r["ranks"])
        is_ref = ref is r
        diff = ("%+.2f points" % (100 * (r["final_test_acc"] - ref["final_test_acc"]))
                if ref and not is_ref else "reference")
        rows.append(["%d" % r["ranks"], "plain" if r["zero"] == 0 else "--zero %d" % r["zero"],
                     pct(r["final_test_acc"]), diff, fmt(r["final_loss"], 4),
                     "%d" % r["params_bytes"], "%d" % r["grads_bytes"], "%d" % r["optimizer_bytes"],
                     ratio(r["grads_bytes"] + r["optimizer_bytes"],
                           ref["grads_bytes"] + ref["optimizer_bytes"]) if ref else "-",
                     fmt(r["train_s"], 1)])
    head = ["ranks", "run", "test accuracy", "vs plain", "final loss", "parameters (B)",
            "gradients (B)", "momentum (B)", "gradients + momentum / plain's", "training (s)"]
    text = ["Each --zero run against plain data parallelism on the same number of ranks: the "
            "difference in test accuracy, and the bytes of gradients and momentum per rank "
            "as a ratio of plain's.", "",
            md_table(head, rows, ["---:", "---", "---:", "---", "---:", "---:", "---:", "---:",
                                  "---:", "---:"]), ""]
    p = doc.get("params", {})
    return ("data %s, %s epoch(s), global batch %s, %s KiB buckets" % (
        p.get("data"), p.get("epochs"), p.get("global_batch"), p.get("bucket_kb")), text, [])


def body_elastic(doc):
    rs = doc["results"]
    base = next((r for r in rs if r["run"] == "un-killed"), None)
    rows = []
    for r in rs:
        rows.append([r["run"], pct(r["final_test_acc"]), fmt(r["final_loss"], 4), fmt(r["train_s"], 1),
                     ratio(r["train_s"], base and base["train_s"]) if base else "-"])
    text = [md_table(["run", "test accuracy", "final loss", "training (s)", "time / un-killed's"], rows,
                     ["---", "---:", "---:", "---:", "---:"]), ""]
    for el in (r for r in rs if r is not base):
        # Older data keeps the one elastic run's losses beside the results.
        lost = el.get("lost") or ([doc["lost"]] if doc.get("lost") else [])
        said = []
        for x in lost:
            said.append("rank(s) %s of %d in step %d (epoch %d), %.2f s lost; %d went on"
                        % (x["ranks"], x["survivors"] + len(x["ranks"].split(",")), x["step"], x["epoch"],
                           x["lost_s"], x["survivors"]))
        line = "%s: lost %s." % (el["run"], "; then ".join(said)) if said else "%s: no loss reported." % el["run"]
        if base and base["final_test_acc"] is not None and el["final_test_acc"] is not None:
            line += (" Against the un-killed run of the same job: %+.2f points of test accuracy, %s times its "
                     "training time." % (100 * (el["final_test_acc"] - base["final_test_acc"]),
                                         ratio(el["train_s"], base["train_s"])))
        text += [line, ""]
    if any(r["run"].startswith("elastic (rank 0") for r in rs):
        text += ["Ranks are numbered in the communicator they were lost from: in the run that loses rank 0 "
                 "and then rank 1, the second loss is rank 0 of the 3 that went on (the job's rank 1, which "
                 "had taken rank 0's place). Each time the lowest surviving rank led the others in the "
                 "dead rank 0's place (docs/design/failures.md, the succession).", ""]
    p = doc.get("params", {})
    killed = "rank %s killed" % p.get("killed_rank")
    if p.get("killed_ranks_then"):
        killed += "; ranks %s killed one after the other" % " then ".join(map(str, p["killed_ranks_then"]))
    return ("data %s, %s epochs, global batch %s, %s ranks over %s, %s"
            % (p.get("data"), p.get("epochs"), p.get("global_batch"), p.get("ranks"), p.get("transport"),
               killed), text, [])


def body_stragglers(doc):
    rs = {r["straggler"]: r for r in doc["results"]}
    slow = doc.get("params", {}).get("slow_rank")
    rows = []
    for mode, r in rs.items():
        for k in r["ranks"]:
            rows.append([mode, "%d%s" % (k["rank"], " (slowed)" if k["rank"] == slow else ""), k["batch"],
                         "%s / %s" % (ms(k["step_median_s"]), ms(k["step_p90_s"])),
                         "%s / %s" % (ms(k["compute_median_s"]), ms(k["compute_p90_s"])),
                         "%s / %s" % (ms(k["wait_median_s"]), ms(k["wait_p90_s"])), pct(k["wait_share"])])
    head = ["--straggler", "rank", "batch share", "step median / p90 (ms)", "compute median / p90 (ms)",
            "wait median / p90 (ms)", "waited beyond the slowest"]
    text = ["Per rank, from the trainer's reports (\"slowed\" is the rank under the CPU quota; on a "
            "machine busier than its cores every rank is starved of CPU, and the quota may then bind "
            "less than the load does: the trainer's verdict names the rank that was slowest):", "",
            md_table(head, rows, ["---", "---", "---:", "---:", "---:", "---:", "---:"]), ""]
    none, bal = rs.get("none"), rs.get("balance")
    if none and bal:
        summ = [["slowest rank (the trainer's verdict)", none.get("slowest_rank"), bal.get("slowest_rank"), ""],
                ["time per epoch (s)", fmt(none["epoch_s"], 2), fmt(bal["epoch_s"], 2),
                 ratio(bal["epoch_s"], none["epoch_s"])],
                ["wait share of the run", pct(none["wait_share"]), pct(bal["wait_share"]),
                 ratio(bal["wait_share"], none["wait_share"])],
                ["final loss", fmt(none["final_loss"], 4), fmt(bal["final_loss"], 4),
                 ratio(bal["final_loss"], none["final_loss"], 3)]]
        nb = {k["rank"]: k for k in none["ranks"]}
        for k in bal["ranks"]:
            if k["rank"] != slow and k["rank"] in nb:
                summ.append(["rank %d's median wait (ms)" % k["rank"], ms(nb[k["rank"]]["wait_median_s"]),
                             ms(k["wait_median_s"]), ratio(k["wait_median_s"], nb[k["rank"]]["wait_median_s"])])
        text += ["Balanced against unmitigated, in the same campaign (a ratio below 1: balance is "
                 "faster or waits less):", "",
                 md_table(["figure", "none", "balance", "balance / none"], summ, ["---", "---:", "---:", "---:"]),
                 ""]
    p = doc.get("params", {})
    return ("%s hosts at %s, rank %s held to %s%% of one CPU; gradwire train %s"
            % (p.get("hosts"), p.get("rate"), slow, p.get("cpu_quota_pct"), p.get("train")), text, [])


def body_fusion(doc):
    rows = [[r["config"], r["iters"]] + [fmt(1e3 * r[k], 3) for k in ("median_s", "min_s", "max_s")]
            for r in doc["results"]]
    text = ["Per configuration, the median over iterations of the slowest rank's time for all the "
            "tensors, and its range:", "",
            md_table(["configuration", "iterations", "median (ms)", "min (ms)", "max (ms)"], rows,
                     ["---", "---:", "---:", "---:", "---:"]), "",
            "Ratios of the medians, measured side by side in this run (above 1: the second is faster):", "",
            md_table(["ratio", "value"], [[k, "%.2fx" % v] for k, v in doc.get("ratios", {}).items()],
                     ["---", "---:"]), ""]
    p = doc.get("params", {})
    return ("%s ranks, %s tensors of %s bytes (%s), %s iterations after %s of warm-up" % (
        p.get("ranks"), p.get("tensors"), p.get("bytes"), p.get("dtype"), p.get("iters"), p.get("warmup")),
        text, [])


def body_acceptance(doc):
    p = doc.get("params", {})
    link = p.get("link_GBps")
    phases = ["host sanity", "link matrix", "retests", "collectives"]
    rows = []
    for r in doc["results"]:
        tot = r["elapsed_s"]
        cells = [r["hosts"], r["verdict"], fmt(tot, 1)]
        for ph in phases:
            v = r["phases_s"].get(ph)
            cells.append("%s (%s)" % (fmt(v, 1), "%.0f%%" % (100 * v / tot) if v is not None and tot else "-"))
        cells += [r.get("rounds", "-"), ratio(r.get("link_bw_GBps"), link), ratio(r.get("allreduce_busbw_GBps"), link)]
        rows.append(cells)
    head = ["hosts", "verdict", "total (s)"] + ["%s (s, share)" % ph for ph in phases] + [
        "matrix rounds", "link bw / link rate", "allreduce busbw / link rate"]
    text = ["Each phase's time and its share of the whole check; the bandwidths the check measured, "
            "as ratios to the links' shaped rate (%s, %s GB/s):" % (p.get("rate"), fmt(link, 3)), "",
            md_table(head, rows), ""]
    res = doc["results"]
    if len(res) > 1 and res[0]["elapsed_s"]:
        text += ["From %d to %d hosts the check took %s times as long." % (
            res[0]["hosts"], res[-1]["hosts"], ratio(res[-1]["elapsed_s"], res[0]["elapsed_s"])), ""]
    series = [(ph, [(r["hosts"], r["phases_s"].get(ph)) for r in res]) for ph in phases]
    series.append(("total", [(r["hosts"], r["elapsed_s"]) for r in res]))
    plots = [("phases", "gradwire check --quick: time per phase against hosts", "hosts", "time (s)", False,
              False, series)] if len(res) > 1 else []
    return "hosts %s, links at %s, gradwire check %s" % (
        " ".join(str(h) for h in p.get("hosts", [])), p.get("rate"), p.get("check")), text, plots


def body_soft_roce(doc):
    rows, bw = [], []
    for r in doc["results"]:
        what = {"bandwidth": "bandwidth (GB/s)",
                "latency-standard": "latency (us; gradwire p50, standard sends)"}.get(
                    r["kind"], "latency (us; gradwire p50, synchronous sends)")
        # Only finite ratios: a perftest round that reported 0 is a failed
        # round, not an infinitely fast gradwire.
        ratios = [x for x in r["ratios"] if math.isfinite(x) and x > 0]
        rows.append([size_name(r["size"]), what, sig(med_or_none([x for x in r["perftest"] if x > 0])),
                     sig(med_or_none(r["gradwire"])),
                     "%.2f (%.2f to %.2f)" % (median(ratios), min(ratios), max(ratios)) if ratios else "-",
                     len(ratios)])
        if r["kind"] == "bandwidth":
            bw.append(r)
    head = ["size", "figure", "perftest (median)", "gradwire (median)",
            "gradwire / perftest, paired (median, range)", "rounds"]
    text = ["gradwire's figure over perftest's, each gradwire round paired with the perftest rounds "
            "either side of it (bandwidth: > 1 is gradwire faster; latency: < 1 is gradwire "
            "faster); a perftest round that reported 0 failed and is left out, with its ratio. "
            "rxe_2vm_perf.sh's bandwidth target (the median paired ratio at 1 MiB and "
            "2 MiB at least 0.95) %s." % ("was met in this run" if doc.get("target_met") else
                              "was not met in this run" if doc.get("ok", True) else
                              "could not be judged: the run failed"), "",
            md_table(head, rows, ["---:", "---", "---:", "---:", "---:", "---:"]), ""]
    plots = []
    if bw:
        series = [("gradwire (gradwire-bench p2p)", [(r["size"], med_or_none(r["gradwire"])) for r in bw]),
                  ("perftest ib_write_bw", [(r["size"], med_or_none(r["perftest"])) for r in bw])]
        plots.append(("busbw", "Soft-RoCE between two VMs: bandwidth against size", "size (bytes)",
                      "bandwidth (GB/s)", "size", False, series))
    p = doc.get("params", {})
    return ("%s hosts (VMs), transport %s, %s rounds of %s MiB" % (
        p.get("hosts"), p.get("transport"), p.get("rounds"), p.get("mib_per_round")), text, plots)


# The latency campaign's kinds of run (bench/latency.sh), as the page names
# them, and the MPI call each ping-pong's peer sends with.
LATENCY_KINDS = {
    "allreduce": "allreduce",
    "pingpong": "ping-pong (half round trip)",
    "pingpong-standard": "ping-pong (half round trip), standard sends (GW_P2P_SEND=standard; MPI_Send)",
    "pingpong-sync": "ping-pong (half round trip), synchronous sends (gradwire's default; MPI_Ssend)",
}


LATENCY_PEER_SEND = {"pingpong-standard": ", MPI_Send", "pingpong-sync": ", MPI_Ssend"}


def body_latency(doc):
    p = doc.get("params", {})
    groups = {}
    for r in doc["results"]:
        groups.setdefault((r["kind"], r["transport"], r["ranks"], r["bind"]), []).append(r)
    peer = {"shm": "Open MPI vader", "tcp": "Open MPI tcp"}
    text, plots, met, judged = [], [], 0, 0
    for (kind, tr, n, bind), rows in sorted(groups.items()):
        out, gser, mser = [], [], []
        for r in sorted(rows, key=lambda r: r["size"]):
            g, m = med_or_none(r["gradwire_us"]), med_or_none(r["openmpi_us"])
            ratio = g / m if g and m else None
            if ratio is not None:
                judged += 1
                met += ratio <= 1
            out.append([size_name(r["size"]), sig(g), sig(m), "-" if ratio is None else "%.2f" % ratio,
                        "%d / %d" % (len(r["gradwire_us"]), len(r["openmpi_us"]))])
            gser.append((r["size"], g))
            mser.append((r["size"], m))
        what = LATENCY_KINDS.get(kind, kind)
        mpi = peer.get(tr, "Open MPI") + LATENCY_PEER_SEND.get(kind, "")
        text += ["%s, %s, %d ranks, %s:" % (what, tr, n, "bound to cores" if bind == "core" else "unbound"), "",
                 md_table(["size", "gradwire (us)", "%s (us)" % mpi,
                           "gradwire / Open MPI", "runs"], out, ["---:", "---:", "---:", "---:", "---:"]), ""]
        plots.append(("%s-%s-%d-%s" % (kind, tr, n, bind), "%s over %s, %d ranks, %s: time against size"
                      % (what, tr, n, "bound" if bind == "core" else "unbound"), "size (bytes)", "time (us)",
                      "size", True, [("gradwire", gser), (mpi, mser)]))
    head = ["Times in microseconds, the median over the runs of each run's median; a ratio below 1 is "
            "gradwire faster. The target of issue 30 (every size at or below Open MPI's time) is met "
            "in %d of the %d rows measured in this run%s." % (
                met, judged, "" if not busy(doc.get("run", {})) else
                ", measured while the machine was busier than its cores: indicative only"), ""]
    if p.get("skipped"):
        head += ["Not measured here: %s." % "; ".join(p["skipped"]), ""]
    return ("ranks %s, %s, transports %s, %s timed iterations (%s warm-up) per run, %s runs" % (
        " and ".join(str(x) for x in p.get("ranks", [])), " and ".join(
            "bound" if b == "core" else "unbound" for b in p.get("binds", [])),
        " and ".join(p.get("transports", [])), p.get("iters"), p.get("warmup"), p.get("reps")),
        head + text, plots)


# What a test that passes on gloo and not on gradwire tells of the backend,
# where its one-line reason does not say it: the page's "why" column.
SUITE_WHY = {
    "test_get_backend": "an artefact of running the suite as gloo: get_backend() says "
                        "\"gradwire\" where the suite expects \"gloo\"",
    "test_sparse_all_reduce_sum": "sparse tensors are refused with a TypeError that says so; gloo "
                                  "reduces them",
}


def body_torch_suite(doc):
    rs, backends = doc["results"], ("gloo", "gradwire")
    kinds = ("pass", "fail", "error", "skip")
    counts = {b: {k: 0 for k in kinds} for b in backends}
    for r in rs:
        for b in backends:
            o = (r.get(b) or {}).get("outcome")
            if o in counts[b]:
                counts[b][o] += 1
    text = [md_table(["backend"] + list(kinds), [[b] + ["%d" % counts[b][k] for k in kinds]
                                                  for b in backends],
                     ["---"] + ["---:"] * len(kinds)), ""]
    differ = [r for r in rs if (r.get("gloo") or {}).get("outcome")
              != (r.get("gradwire") or {}).get("outcome")]
    if differ:
        text += ["The tests whose outcome differs:", ""]
        rows = []
        for r in differ:
            g, w = r.get("gloo") or {}, r.get("gradwire") or {}
            why = SUITE_WHY.get(r["test"]) or w.get("reason") or g.get("reason") or ""
            rows.append(["`%s`" % r["test"], g.get("outcome", "not run"), w.get("outcome", "not run"),
                         why.replace("|", "\\|")])
        text += [md_table(["test", "gloo", "gradwire", "why"], rows, ["---"] * 4), ""]
    else:
        text += ["Every test has the same outcome on both.", ""]
    same = [r for r in rs if r not in differ and (r.get("gloo") or {}).get("outcome") in ("error", "fail", "skip")]
    if same:
        text += ["Not passing on either, with the same outcome on both (the suite's own reasons):", ""]
        text += [md_table(["test", "outcome", "reason"],
                          [["`%s`" % r["test"], r["gloo"]["outcome"],
                            (r["gloo"].get("reason") or "").replace("|", "\\|")] for r in same],
                          ["---"] * 3), ""]
    p = doc.get("params", {})
    secs = p.get("seconds", {})
    return ("%s tests of the list, %s ranks, torch %s, Python %s; the runs took %s s (gloo) and %s s "
            "(gradwire)" % (p.get("tests"), p.get("ranks"), p.get("torch"), p.get("python"),
                            secs.get("gloo"), secs.get("gradwire")), text, [])


BODIES = {"scale": body_scale, "torch-suite": body_torch_suite, "train-accuracy": body_train_accuracy, "elastic": body_elastic,
          "stragglers": body_stragglers, "acceptance": body_acceptance, "soft-roce": body_soft_roce,
          "fusion": body_fusion, "latency": body_latency, "zero": body_zero}
