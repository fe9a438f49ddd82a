"""benchmarks/run's parsing, goal judgements (the goals of benchmarks/goals.json), data files,
plots and performance page, on benchmark output kept in tests/host/data (what runs on one and two
H200s printed, in earlier output formats too) and on a synthetic p2p_bench output in the current
format, so that the report says what the numbers say."""
import importlib.machinery
import importlib.util
import json
import sys
import tempfile
import unittest
from unittest import mock
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
loader = importlib.machinery.SourceFileLoader("bench_run", str(ROOT / "benchmarks" / "run"))
spec = importlib.util.spec_from_loader("bench_run", loader)
run = importlib.util.module_from_spec(spec)
loader.exec_module(run)


DATA = ROOT / "tests" / "host" / "data"
SYNTHETIC = DATA / "p2p_bench_synthetic.txt"
has_matplotlib = importlib.util.find_spec("matplotlib") is not None


def tables_of(**files):
    return {name: run.parse_tables((DATA / f).read_text() if isinstance(f, str)
                                   else f.read_text()) for name, f in files.items()}


def goals_of(**files):
    return {goal: (result, status) for goal, result, status in run.goals(tables_of(**files))}


def goal_text(goal_id):
    return next(g["text"] for g in run.load_goals() if g["id"] == goal_id)


class ReportTest(unittest.TestCase):
    def test_tables_are_parsed_with_their_headings(self):
        text = "## first\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 | x |\n\ntext\n| c |\n| --- |\n| 5 |\n"
        tables = run.parse_tables(text)
        self.assertEqual(len(tables), 2)
        self.assertEqual(tables[0], ("first", ["a", "b"], [["1", "2"], ["3", "x"]]))
        self.assertEqual(run.column(tables[0], "b"), [2.0, None])
        self.assertEqual(tables[1][0], "first")  # no new heading: the last one applies

    def test_p2p_goals_follow_the_2_gpu_run(self):
        g = goals_of(p2p_bench="pair_first/p2p_bench.md")
        self.assertEqual(g["peer-to-peer all_reduce ≥ 2× faster than NCCL at ≤ 8 KiB"],
                         ("1.34–2.07×", "missed"))
        self.assertEqual(g["peer-to-peer all_reduce busbw ≥ NCCL's from 64 MiB"],
                         ("1.015–1.161× NCCL", "met"))

    def test_nccl_goals_follow_the_2_gpu_run(self):
        g = goals_of(nccl_bench="pair_first/nccl_bench.md")
        self.assertEqual(g["all_reduce through NCCL ≥ 0.98 × raw busbw from 1 MiB"], ("0.974–1.007", "missed"))
        result, status = g["all_reduce through NCCL adds ≤ 1 µs per call below 1 MiB"]
        self.assertEqual(status, "missed")  # in place: 65536 bytes took 1.01 µs more
        self.assertEqual(result, "-5.91 to +1.01 µs")

    def test_copy_goal_reads_the_stream_form_not_the_ordered_one(self):
        # copy_bench prints "ratio" (copy_to(target, stream)) before "ordered ratio" (copy_to(target)).
        g = goals_of(copy_bench="pair_second/copy_bench.txt")
        self.assertEqual(g["peer copy ≥ 0.98 × cudaMemcpyPeerAsync (one way, from 16 MiB)"],
                         ("1.000–1.004", "met"))

    def test_a_second_2_gpu_report(self):
        g = goals_of(nccl_bench="pair_second/nccl_bench.txt",
                     p2p_bench="pair_second/p2p_bench.txt")
        self.assertEqual(g["all_reduce through NCCL ≥ 0.98 × raw busbw from 1 MiB"], ("0.967–1.007", "missed"))
        self.assertEqual(g["peer-to-peer all_reduce ≥ 2× faster than NCCL at ≤ 8 KiB"], ("1.49–1.70×", "missed"))
        self.assertEqual(g["peer-to-peer all_reduce busbw ≥ NCCL's from 64 MiB"], ("1.018–1.160× NCCL", "met"))

    def test_fused_goal_reads_rows_up_to_128_kib_eager_and_graph(self):
        text = ("## fused layer tail against unfused (us per call)\n\n"
                "| hidden | tokens | KiB per rank | unfused us | fused us | speed-up | unfused graph us "
                "| fused graph us | graph speed-up | nccl+norm us |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
                "| 4096 | 1 | 8 | 10 | 7 | 1.43 | 9 | 6 | 1.50 | - |\n"
                "| 4096 | 16 | 128 | 12 | 10 | 1.20 | 9 | 6 | 1.50 | - |\n"
                "| 4096 | 128 | 1024 | 20 | 19 | 1.05 | 19 | 18 | 1.05 | - |\n")
        rows = run.goals({"fused_bench": run.parse_tables(text)},
                         {"fused_bench": ["# group: 2 member(s) emulated on GPU 0"]})
        fused = [(goal, result, status) for goal, result, status in rows
                 if goal.startswith("fused layer tail")]
        # 1024 KiB is past the goals' range; the emulated pair is said.
        self.assertEqual(fused, [
            ("fused layer tail ≥ 1.3 × unfused up to 128 KiB per rank (eager) — an emulated pair on one GPU in this run", "1.20–1.43×", "missed"),
            ("fused layer tail ≥ 1.3 × unfused up to 128 KiB per rank (replayed from graphs) — an emulated pair on one GPU in this run", "1.50–1.50×", "met")])

    def test_one_rank_and_one_gpu_are_not_judged_as_peers(self):
        g = goals_of(nccl_bench="one_gpu_report/nccl_bench.txt")
        for goal in ("all_reduce through NCCL ≥ 0.98 × raw busbw from 1 MiB",
                     "all_reduce through NCCL adds ≤ 1 µs per call below 1 MiB"):
            self.assertEqual(g[goal], ("one rank only: nothing moves; measured on 2+ GPUs", "—"))
        # One GPU: the p2p engine on an emulated pair, no NCCL baseline ('-' cells).
        g = goals_of(p2p_bench="one_gpu_report/p2p_bench.txt")
        self.assertEqual(g["peer-to-peer all_reduce ≥ 2× faster than NCCL at ≤ 8 KiB"],
                         ("not measured in this run", "—"))

    @unittest.skipUnless(has_matplotlib, "matplotlib is not installed")
    def test_one_rank_draws_no_nccl_curve_and_does_not_fail(self):
        tables = tables_of(nccl_bench="one_gpu_report/nccl_bench.txt")
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(run.plot(tables, Path(out)), [])  # nothing measured between peers

    def test_goals_without_data_say_so(self):
        g = goals_of()
        self.assertEqual(len(g), len(run.load_goals()))
        self.assertEqual(set(g.values()), {("not measured in this run", "—")})

    def test_goals_json_is_complete(self):
        # "issue" is optional (benchmarks/run reads it with get): a goal need not come from one.
        fields = {"id", "text", "benchmark", "table", "column", "compare", "threshold", "result"}
        ids = set()
        for goal in run.load_goals():
            self.assertLessEqual(fields, set(goal), goal.get("id"))
            if "issue" in goal:
                self.assertIsInstance(goal["issue"], int, goal["id"])
            self.assertIn(goal["compare"], (">=", "<="))
            self.assertIn(goal["benchmark"], run.BENCHMARKS)
            self.assertNotIn(goal["id"], ids)
            ids.add(goal["id"])
        for wanted in ("p2p-graph-small-time", "p2p-graph-small-vs-nccl", "p2p-eager-small",
                       "p2p-busbw-vs-link", "views-cost-nothing", "views-cost-nothing-sort",
                       "pool-scratch"):
            self.assertIn(wanted, ids)

    def test_p2p_goals_on_the_current_format(self):
        g = goals_of(p2p_bench=SYNTHETIC)
        # 16384 bytes (5.00 us, 1.30x) lies outside <= 8 KiB and must not count.
        self.assertEqual(g[goal_text("p2p-graph-small-time")], ("2.90–3.40 µs", "met"))
        self.assertEqual(g[goal_text("p2p-graph-small-vs-nccl")],
                         ("NCCL takes 1.88–2.10× as long", "missed"))
        self.assertEqual(g[goal_text("p2p-eager-small")], ("2.21–2.28×", "met"))
        self.assertEqual(g[goal_text("p2p-busbw-vs-link")], ("0.930–0.935 × the link", "met"))
        self.assertEqual(g[goal_text("p2p-busbw-vs-nccl")], ("1.064–1.162× NCCL", "met"))

    def test_the_evaluator_compares_and_filters_as_goals_json_says(self):
        tables = {"b": [("t", ["bytes", "x", "y"], [["1", "5", "1"], ["2", "3", "1"], ["4", "-", "1"], ["8", "9", "1"]])]}
        def goal(**kw):
            base = {"id": "g", "text": "g", "benchmark": "b", "table": {"header": "x"}, "column": "x",
                    "compare": ">=", "threshold": 3, "result": "{min:g}..{max:g} of {count}"}
            return run.judge(dict(base, **kw), tables)
        self.assertEqual(goal()["status"], "met")
        self.assertEqual(goal()["result"], "3..9 of 3")  # '-' is not a value
        self.assertEqual(goal(threshold=4)["status"], "missed")
        self.assertEqual(goal(compare="<=", threshold=9)["status"], "met")
        self.assertEqual(goal(rows={"column": "bytes", "max": 2})["result"], "3..5 of 2")
        self.assertEqual(goal(rows={"column": "bytes", "min": 8})["result"], "9..9 of 1")
        self.assertEqual(goal(skip_rows=1)["result"], "3..9 of 2")
        self.assertEqual(goal(minus="y")["result"], "2..8 of 3")
        self.assertEqual(goal(table={"header": "x", "title": "other"})["status"], "—")
        self.assertEqual(goal(column="z")["status"], "—")
        with self.assertRaises(ValueError):
            goal(compare=">")

    def test_a_goal_that_needs_more_gpus_than_the_run_had_is_not_judged(self):
        tables = {"b": [("t", ["x"], [["1"], ["9"]])]}
        goal = {"id": "g", "text": "g", "benchmark": "b", "table": {"header": "x"}, "column": "x",
                "compare": ">=", "threshold": 3, "result": "{min:g}", "gpus": 2}
        # On one GPU (an emulated figure) it needs its GPUs, never 'missed'; on two it is judged.
        self.assertEqual(run.judge(goal, tables, gpus=1)["status"], "—")
        self.assertEqual(run.judge(goal, tables, gpus=1)["result"], "needs 2 GPUs; this run had 1")
        self.assertEqual(run.judge(goal, tables, gpus=2)["status"], "missed")
        self.assertEqual(run.judge(dict(goal, gpus=1), tables, gpus=1)["status"], "missed")
        # Every goal of a pair's figures (the scaling, the sort and scan against one GPU, the p2p
        # and NCCL comparisons) says how many GPUs it needs.
        needs_two = {g["id"] for g in run.load_goals() if g.get("gpus", 1) >= 2}
        for wanted in ("strong-scaling", "sort-2e30-uint32", "scan-2e30-floats",
                       "p2p-graph-small-vs-nccl", "fused-layer-tail-graph"):
            self.assertIn(wanted, needs_two)
        self.assertNotIn("p2p-graph-small-time-emulated", needs_two)

    def test_view_and_pool_goals_read_their_own_tables(self):
        for_each = ("## sum of 268435456 floats, host-timed to the value\n\n"
                    "| version | ms | GB/s | vs CUB |\n| --- | --- | --- | --- |\n"
                    "| cub::DeviceReduce::Sum, 1 GPU (baseline) | 0.300 | 3579 | 1.000 |\n\n"
                    "# views and scratch: one GPU visible, so a group of one and an emulated pair on it\n\n"
                    "## views against buffers: the same memory through its distributed_buffer and "
                    "through a distributed_view over its shards, 268435456 floats per GPU\n\n"
                    "| operation | group | buffer us | view us | ratio (buffer/view) |\n"
                    "| --- | --- | --- | --- | --- |\n"
                    "| multi_device_for_each, v = a*v + b | 1 GPU | 450.0 | 449.0 | 1.002 |\n"
                    "| multi_device_reduce sum, pending::wait | 1 GPU | 320.0 | 322.0 | 0.994 |\n"
                    "| multi_device_reduce sum into a device_result | emulated pair on GPU 0 | 300.0 | 301.5 | 0.995 |\n\n"
                    "## scratch from a memory resource: the group's default (the device's pool) "
                    "against a cudaMemPool_t that keeps its memory, 268435456 floats per GPU\n\n"
                    "| operation | group | default us | pool us | ratio (pool/default) |\n"
                    "| --- | --- | --- | --- | --- |\n"
                    "| multi_device_reduce sum, pending::wait | 1 GPU | 340.0 | 320.0 | 0.941 |\n"
                    "| multi_device_inclusive_scan, x into y | 1 GPU | 900.0 | 899.0 | 0.999 |\n")
        scan_sort = ("## sort of uint32 keys: one GPU's cub::DeviceRadixSort vs multi_device_sort on 2 members\n\n"
                     "| n | cub one GPU ms | cohort ms | ratio |\n| --- | --- | --- | --- |\n"
                     "| 1073741824 | 100.0 | 60.0 | 1.67 |\n\n"
                     "## views against buffers: multi_device_sort of uint32 keys through a "
                     "distributed_buffer and through a distributed_view over its shards, on 2 members\n\n"
                     "| n | buffer ms | view ms | ratio (buffer/view) |\n| --- | --- | --- | --- |\n"
                     "| 16777216 | 2.000 | 1.990 | 1.005 |\n| 67108864 | 8.000 | 8.100 | 0.988 |\n")
        verdicts = {v["id"]: v for v in (
            run.judge(g, {"for_each_bench": run.parse_tables(for_each),
                          "scan_sort_bench": run.parse_tables(scan_sort)},
                      {"for_each_bench": ["# views and scratch: one GPU visible, so a group of one "
                                          "and an emulated pair on it"]})
            for g in run.load_goals())}
        self.assertEqual((verdicts["views-cost-nothing"]["result"], verdicts["views-cost-nothing"]["status"]),
                         ("0.994–1.002 over 3 rows", "met"))
        self.assertIn("emulated pair", verdicts["views-cost-nothing"]["text"])
        self.assertEqual((verdicts["views-cost-nothing-sort"]["result"],
                          verdicts["views-cost-nothing-sort"]["status"]), ("0.988–1.005 over 2 sizes", "met"))
        self.assertEqual((verdicts["pool-scratch"]["result"], verdicts["pool-scratch"]["status"]),
                         ("0.941–0.999 over 2 rows", "missed"))
        # The views table does not take the place of the sort goal's table.
        self.assertEqual(verdicts["sort-2e30-uint32"]["result"], "1.67×")

    def test_one_member_goals_read_their_own_tables(self):
        scan_sort = ("## sort of uint32 keys: one GPU's cub::DeviceRadixSort vs multi_device_sort on 2 members\n\n"
                     "| n | cub one GPU ms | cohort ms | ratio |\n| --- | --- | --- | --- |\n"
                     "| 1073741824 | 100.0 | 60.0 | 1.67 |\n\n"
                     "## group of one: scans against cub::DeviceScan, GPU 0\n\n"
                     "| n | type | scan | cub ms | cohort ms | cub / cohort |\n"
                     "| --- | --- | --- | --- | --- | --- |\n"
                     "| 1048576 | float | inclusive | 0.020 | 0.020 | 0.990 |\n"
                     "| 1073741824 | uint64 | exclusive | skipped: does not fit | | |\n\n"
                     "## group of one: sorts against cub::DeviceRadixSort, GPU 0\n\n"
                     "| n | keys | values | cub ms | cohort ms | cub / cohort |\n"
                     "| --- | --- | --- | --- | --- | --- |\n"
                     "| 1048576 | uint32 | none | 0.050 | 0.051 | 0.975 |\n"
                     "| 1048576 | uint32 | uint32 | 0.080 | 0.079 | 1.010 |\n")
        for_each = ("## group of one: sums, minima and maxima to the host (pending::wait) against "
                    "cub::DeviceReduce, a copy to pinned memory and a wait, GPU 0\n\n"
                    "| n | type | operation | cub us | cohort us | cub / cohort |\n"
                    "| --- | --- | --- | --- | --- | --- |\n"
                    "| 1048576 | float | sum | 30.0 | 25.0 | 1.200 |\n\n"
                    "## group of one: sums, minima and maxima into device memory (device_result) "
                    "against cub::DeviceReduce, in batches of 10 calls, GPU 0\n\n"
                    "| n | type | operation | cub us | cohort us | cub / cohort |\n"
                    "| --- | --- | --- | --- | --- | --- |\n"
                    "| 1048576 | uint64 | max | 10.0 | 10.1 | 0.990 |\n\n"
                    "## group of one: other operators, kept in order, into device memory against "
                    "cub::DeviceReduce::Reduce with the same operator, in batches of 10 calls, GPU 0\n\n"
                    "| n | type | operation | cub us | cohort us | cub / cohort |\n"
                    "| --- | --- | --- | --- | --- | --- |\n"
                    "| 1048576 | float | min | 10.0 | 10.4 | 0.962 |\n")
        tables = {"scan_sort_bench": run.parse_tables(scan_sort),
                  "for_each_bench": run.parse_tables(for_each)}
        verdicts = {v["id"]: (v["result"], v["status"])
                    for v in (run.judge(g, tables) for g in run.load_goals())}
        self.assertEqual(verdicts["one-member-scan"], ("0.990–0.990 over 1 rows", "met"))
        self.assertEqual(verdicts["one-member-sort"], ("0.975–1.010 over 2 rows", "missed"))
        self.assertEqual(verdicts["one-member-reduce-to-host"], ("1.200–1.200 over 1 rows", "met"))
        self.assertEqual(verdicts["one-member-reduce-on-device"], ("0.990–0.990 over 1 rows", "met"))
        self.assertEqual(verdicts["one-member-reduce-in-order"], ("0.962–0.962 over 1 rows", "met"))
        # The multi-GPU sort goal keeps its own table.
        self.assertEqual(verdicts["sort-2e30-uint32"][0], "1.67×")

    def test_roofline_and_host_time_goals_read_their_own_tables(self):
        for_each = ("## y = a*x + y, 268435456 floats (3.00 GiB moved per call), GPU 0\n\n"
                    "| version | ms | GB/s | vs thrust | vs copy bandwidth (4000 GB/s) |\n"
                    "| --- | --- | --- | --- | --- |\n"
                    "| thrust::for_each (baseline) | 1.000 | 3500 | 1.000 | 0.890 |\n\n"
                    "## host time per call on a 1-element range, GPU 0, NVTX ranges on and off\n\n"
                    "| version | us per call | over the baseline us | us per call, COHORT_NVTX=0 | "
                    "NVTX on - off us |\n| --- | --- | --- | --- | --- |\n"
                    "| cudaSetDevice + kernel<<<1,1>>> (baseline) | 2.00 | - | 2.00 | 0.00 |\n"
                    "| cohort::launch of the same kernel | 2.50 | 0.50 | 2.40 | 0.10 |\n"
                    "| cudaSetDevice + kernel<<<1,1>>> on each of 2 streams (baseline) | 4.00 | - | - | - |\n"
                    "| cohort::multi_device_for_each over indices, emulated pair | 5.20 | 1.20 | - | - |\n\n"
                    "## element form at the memory roofline: v = a*v + b in place, 268435456 "
                    "elements per GPU, against a device-to-device copy of as many bytes\n\n"
                    "| element | group | copy GB/s | cohort GB/s | cohort vs copy | register-copy "
                    "kernel vs copy |\n| --- | --- | --- | --- | --- | --- |\n"
                    "| float | 1 GPU | 4000 | 3600 | 0.900 | 0.980 |\n"
                    "| half | emulated pair on GPU 0 | 4000 | 3880 | 0.970 | 0.990 |\n")
        verdicts = {v["id"]: (v["result"], v["status"])
                    for v in (run.judge(g, {"for_each_bench": run.parse_tables(for_each)})
                              for g in run.load_goals())}
        # The roofline goal reads its own table, not the index form's copy-bandwidth column.
        self.assertEqual(verdicts["for_each-roofline"], ("0.900–0.970 over 2 rows", "missed"))
        # Each row is measured against the baseline above it; baselines are not judged.
        self.assertEqual(verdicts["host-time-per-call"], ("0.50–1.20 µs over 2 rows", "missed"))

    def test_tables_as_data(self):
        tables = run.parse_tables(SYNTHETIC.read_text())
        data = run.as_data("p2p_bench", tables, ["# a note"])
        json.dumps(data)  # serialisable as it is written
        self.assertEqual([t["title"] for t in data["tables"]][1],
                         "the link: one-way cudaMemcpyPeerAsync against p2p busbw")
        first = data["tables"][0]
        self.assertEqual(first["header"][6], "automatic graph us")
        self.assertEqual(first["rows"][0][:2], [8.0, 18.84096])
        self.assertIsNone(first["rows"][-1][3])  # '-': one-shot not measured there

    @unittest.skipUnless(has_matplotlib, "matplotlib is not installed")
    def test_plots_of_the_new_format_and_of_a_kept_run(self):
        from matplotlib import image
        with tempfile.TemporaryDirectory() as out:
            drawn = run.plot({"p2p_bench": run.parse_tables(SYNTHETIC.read_text())}, Path(out))
            self.assertEqual(drawn, ["all_reduce_time.png", "all_reduce_busbw.png"])
            self.assertGreater(image.imread(str(Path(out) / "all_reduce_time.png")).shape[0], 100)
        tables = tables_of(nccl_bench="pair_report/nccl_bench.txt",
                           p2p_bench="pair_report/p2p_bench.txt",
                           for_each_bench="pair_report/for_each_bench.txt")
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(run.plot(tables, Path(out)),
                             ["all_reduce_time.png", "all_reduce_busbw.png", "scaling_efficiency.png"])

    @unittest.skipUnless(has_matplotlib, "matplotlib is not installed")
    def test_log_axes_keep_log_ticks_and_gpu_counts_whole_ones(self):
        # The busbw plot once got the GPU-count locator of the scaling plot, which garbled its
        # log axis: each figure's x axis is recorded as it is saved.
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
        seen, original = {}, Figure.savefig

        def record(fig, path, *args, **kwargs):
            ax = fig.axes[0]
            seen[Path(path).name] = (ax.get_xscale(), type(ax.xaxis.get_major_locator()).__name__)
            return original(fig, path, *args, **kwargs)

        tables = tables_of(nccl_bench="pair_report/nccl_bench.txt",
                           p2p_bench="pair_report/p2p_bench.txt",
                           for_each_bench="pair_report/for_each_bench.txt")
        with mock.patch.object(Figure, "savefig", record), tempfile.TemporaryDirectory() as out:
            run.plot(tables, Path(out))
        self.assertEqual(seen["all_reduce_time.png"], ("log", "LogLocator"))
        self.assertEqual(seen["all_reduce_busbw.png"], ("log", "LogLocator"))
        self.assertEqual(seen["scaling_efficiency.png"], ("linear", "MaxNLocator"))

    def test_the_performance_page_keeps_each_machines_newest_figures(self):
        page = run.performance_page([DATA / "pair_report", DATA / "one_gpu_json_report"])
        # The machines with the dates of their measurements, newest first.
        self.assertIn("| 2026-12-01 | 1 × NVIDIA H200 | — | 580.159.04 | 13.0 | not used |", page)
        self.assertIn("| 2026-11-30 | 2 × NVIDIA H200 | NV18 | 580.159.04 | 13.0 | 2.28.3 |", page)
        self.assertLess(page.index("| 2026-12-01 |"), page.index("| 2026-11-30 |"))
        # Goals judged on the newest run that measured them, from .txt and from .json tables.
        self.assertIn("| peer-to-peer all_reduce busbw ≥ NCCL's from 64 MiB | 1.015–1.162× NCCL | met "
                      "| 2 × NVIDIA H200, 2026-11-30 |", page)
        # The scan against one-GPU CUB needs two GPUs: the one-GPU run's emulated figure (0.53×)
        # is not judged, and the goal says what it needs.
        self.assertNotIn("| 0.53× | missed |", page)
        self.assertIn("| inclusive scan of 2^30 floats ≥ 1.6 × one-GPU CUB on 2 GPUs (the model of "
                      "several GPUs says why contiguous shards reach 4/3 at best) | needs 2 GPUs; "
                      "this run had 1 | — | — |", page)
        # No link figure among these runs: no model.
        self.assertNotIn("## What several GPUs should take", page)
        self.assertIn("## scan_sort_bench: 1 × NVIDIA H200, 2026-12-01", page)
        self.assertIn("## p2p_bench: 2 × NVIDIA H200, 2026-11-30", page)
        self.assertNotIn("session", page)

    def test_the_model_of_several_gpus_comes_from_the_one_gpu_and_link_figures(self):
        one_gpu = {"gpu_count": 1, "tables": {
            "scan_sort_bench": [
                ("sort of uint32 keys: one GPU's cub::DeviceRadixSort vs multi_device_sort",
                 ["n", "cub one GPU ms", "cohort ms", "ratio"],
                 [["1048576", "0.1", "1.1", "0.09"], ["1073741824", "24.0", "44.0", "0.55"]]),
                ("inclusive sum of floats: one GPU's cub::DeviceScan vs multi_device_inclusive_scan",
                 ["n", "cub one GPU ms", "cohort ms", "ratio"],
                 [["1048576", "0.02", "0.09", "0.2"], ["1073741824", "3.0", "5.2", "0.58"]])],
            "for_each_bench": [("y = a*x + y", ["version", "vs copy bandwidth (4000 GB/s)"], [])]}}
        pair = {"gpu_count": 2, "tables": {"copy_bench": [
            ("", ["bytes", "raw one-way us", "raw GB/s"], [["1073741824", "2684.4", "400.0"]])]}}
        lines = run.model_section([one_gpu, pair])
        text = "\n".join(lines)
        # Sort on 2: 12 ms local, 4 GiB / 4 pulled at 400 GB/s (2.68 ms) over the 0.54 ms merge,
        # 1 ms fixed (1.1 - 0.1): 15.68 ms. Scan on 2: 3/2 of 3 ms over 2 = 2.25 ms.
        self.assertIn("| sort of 2^30 uint32 keys | 24.00 | 15.68 | 1.53 |", text)
        self.assertIn("| inclusive scan of 2^30 floats | 3.00 | 2.25 | 1.33 |", text)
        # A link figure from a one-GPU run does not count.
        pair["gpu_count"] = 1
        self.assertEqual(run.model_section([one_gpu, pair]), [])

    def test_the_time_plot_has_the_four_all_reduce_curves(self):
        t = run.find({"p2p_bench": run.parse_tables(SYNTHETIC.read_text())}, "p2p_bench", "automatic us")
        for name in ("automatic us", "automatic graph us", "nccl us", "nccl graph us"):
            x, y = run.series(t, name, log_y=True)
            self.assertEqual(len(x), 7, name)
            self.assertEqual(x[0], 8.0)


if __name__ == "__main__":
    sys.exit(unittest.main())
